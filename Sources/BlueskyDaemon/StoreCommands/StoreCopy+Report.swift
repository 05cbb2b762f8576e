import AccountStoreCore
import Crypto
import Foundation
import JSONRPC
import Synchronization

/// What `blueskyd store copy` says: a summary in words or JSON on stdout, progress on a terminal.
extension StoreCopy {
    /// - Parameter renumbered: accounts given a new id in the target (old → new): their ids are
    ///   another tenant's in its database.
    func report(_ survey: RegistryCopy.Survey, source: StoreEndpoint, target: StoreEndpoint, copied: Int?, seconds: Double?,
                merge: RegistryMerge? = nil, renumbered: [UUID: UUID] = [:]) {
        var output: String
        let moved = Self.sorted(renumbered)
        if options.json {
            output = Self.json(survey, source: source, target: target, copied: copied, seconds: seconds, merge: merge,
                               renumbered: moved)
        } else {
            output = Self.text(survey, source: source, target: target, copied: copied, seconds: seconds,
                               defaultAccount: Self.targetDefault(survey, merge: merge, renumbered: renumbered))
            if let merge { output += "\n" + merge.summary }
            if !moved.isEmpty { output += "\n" + Self.renumberedText(moved) }
        }
        FileHandle.standardOutput.write(Data((output + "\n").utf8))
    }

    static func kinds(_ survey: RegistryCopy.Survey) -> String {
        let names: [(AuthKind, String)] = [(.appPassword, "app password"), (.oauth, "atproto OAuth"), (.oauth2, "OAuth 2.0")]
        return names.map { "\(survey.byKind[$0.0] ?? 0) \($0.1)" }.joined(separator: ", ")
    }

    /// The default account as the target has it: the source's, under its new id when it was
    /// renumbered; in a merge, the target's own unless it had none (a blind attack saw the
    /// report name an id the target did not hold).
    static func targetDefault(_ survey: RegistryCopy.Survey, merge: RegistryMerge?, renumbered: [UUID: UUID]) -> UUID? {
        if let kept = merge?.targetDefaultID { return kept }
        return survey.defaultAccount.map { renumbered[$0] ?? $0 }
    }

    static func text(_ survey: RegistryCopy.Survey, source: StoreEndpoint, target: StoreEndpoint, copied: Int?, seconds: Double?,
                     defaultAccount: UUID?) -> String {
        let sameKey = source.key == target.key
        var lines = [
            copied.map { "Copied \($0) account\($0 == 1 ? "" : "s") from \(source.location) to \(target.location)"
                + (seconds.map { String(format: " in %.1f s.", $0) } ?? ".") }
                ?? "Dry run: would copy \(survey.accounts) account\(survey.accounts == 1 ? "" : "s") from \(source.location) to "
                + "\(target.location); nothing was written.",
            "  \(kinds(survey)); \(survey.needsLogin) needing a login; \(survey.clientKeys) OAuth client key(s), "
                + "\(survey.nonces) DPoP nonce(s); default: \(defaultAccount?.uuidString.lowercased() ?? "none")",
            "  sealed with the key \(StoreKey.keyFingerprint(target.key)) (\(target.keyFile.path))"
                + (sameKey ? ", the source's" : ", resealed from \(StoreKey.keyFingerprint(source.key))"),
        ]
        if copied != nil {
            lines.append("The source is as it was. Start blueskyd on the target (its store_url and tenant, or its state directory) "
                         + "before the source: tokens rotate, and an account refreshed on both loses its session on one.")
        }
        return lines.joined(separator: "\n")
    }

    static func json(_ survey: RegistryCopy.Survey, source: StoreEndpoint, target: StoreEndpoint, copied: Int?, seconds: Double?,
                     merge: RegistryMerge?, renumbered: [(key: UUID, value: UUID)] = []) -> String {
        let renumberedMap = Dictionary(renumbered.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
        var kinds: [String: JSONValue] = [:]
        for kind in AuthKind.allCases { kinds[kind.rawValue] = .number(Double(survey.byKind[kind] ?? 0)) }
        var object: [String: JSONValue] = [
            "from": .string(source.location), "to": .string(target.location), "dryRun": .bool(copied == nil),
            "accounts": .number(Double(survey.accounts)), "byKind": .object(kinds),
            "needsLogin": .number(Double(survey.needsLogin)), "clientKeys": .number(Double(survey.clientKeys)),
            "nonces": .number(Double(survey.nonces)),
            "default": targetDefault(survey, merge: merge, renumbered: renumberedMap).map { .string($0.uuidString.lowercased()) } ?? .null,
            "keyFingerprint": .string(StoreKey.keyFingerprint(target.key)), "resealed": .bool(source.key != target.key),
        ]
        object["copied"] = copied.map { .number(Double($0)) }
        object["merge"] = merge?.json
        if copied != nil { object["renumbered"] = renumberedJSON(renumbered) }
        object["seconds"] = seconds.map { .number(($0 * 1000).rounded() / 1000) }
        return String(decoding: JSONValue.object(object).encoded(), as: UTF8.self)
    }
}

/// The accounts a copy or an import gave a new id in a PostgreSQL tenant (their ids are another
/// tenant's in its database), old → new: a client policy naming one by its id needs the new one.
extension StoreSubcommand {
    static func renumberedText(_ moved: [(key: UUID, value: UUID)]) -> String {
        var text = "\(moved.count) account(s) have a new id in the target (their ids are another tenant's in its database); "
            + "a client policy naming one by its id needs the new one:"
        for (old, new) in moved.prefix(100) { text += "\n  \(old.uuidString.lowercased()) → \(new.uuidString.lowercased())" }
        if moved.count > 100 { text += "\n  … (--json lists all)" }
        return text
    }

    static func renumberedJSON(_ moved: [(key: UUID, value: UUID)]) -> JSONValue {
        .array(moved.map { .object(["from": .string($0.key.uuidString.lowercased()), "to": .string($0.value.uuidString.lowercased())]) })
    }

    static func sorted(_ renumbered: [UUID: UUID]) -> [(key: UUID, value: UUID)] {
        renumbered.sorted { $0.key.uuidString < $1.key.uuidString }
    }
}

/// "copied N of M" (or another verb) on stderr, on a terminal, at most ten times a second.
final class CopyProgress: Sendable {
    let total: Int
    let shown: Bool
    let verb: String
    private let lastShown = Mutex<ContinuousClock.Instant?>(nil)

    init(total: Int, shown: Bool, verb: String = "copied") {
        self.total = total
        self.shown = shown
        self.verb = verb
    }

    func show(_ copied: Int) {
        guard shown else { return }
        let now = ContinuousClock.now
        let due = lastShown.withLock { last -> Bool in
            guard last.map({ now - $0 >= .milliseconds(100) }) ?? true else { return false }
            last = now
            return true
        }
        if due || copied == total { FileHandle.standardError.write(Data("\r\(verb) \(copied) of \(total) accounts".utf8)) }
    }

    func finish() {
        if shown { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}
