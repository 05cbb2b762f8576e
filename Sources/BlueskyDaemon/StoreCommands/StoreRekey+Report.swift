import AccountStoreCore
import Foundation
import JSONRPC

/// What `blueskyd store rekey` says: a summary in words or JSON on stdout, and what the
/// operator does next (a credential to replace, other hosts to give the new key).
extension StoreRekey {
    struct Outcome {
        let pass: Pass
        /// nil: the store is sealed with the new key already (nothing to do).
        let survey: RegistryCopy.Survey?
        /// nil: a dry run.
        let resealed: Int?
        let seconds: Double?
    }

    func report(_ outcome: Outcome) {
        let output = options.json ? Self.json(outcome, dryRun: options.dryRun) : Self.text(outcome)
        FileHandle.standardOutput.write(Data((output + "\n").utf8))
    }

    static func text(_ outcome: Outcome) -> String {
        let pass = outcome.pass
        let (old, new) = (StoreKey.keyFingerprint(pass.source.key), StoreKey.keyFingerprint(pass.target.key))
        guard let survey = outcome.survey else {
            return "\(pass.source.location) is sealed with the key \(new) (\(pass.target.keyFile.path)) already: nothing to do."
        }
        let counted = "\(survey.accounts) account\(survey.accounts == 1 ? "" : "s") (\(StoreCopy.kinds(survey))) and "
            + "\(survey.clientKeys) OAuth client key(s) of \(pass.source.location)"
        guard let resealed = outcome.resealed else {
            return "Dry run: would reseal \(counted) under the key \(new) (\(pass.target.keyFile.path)), now \(old); nothing was written."
        }
        var lines = ["Resealed \(resealed == survey.accounts ? counted : "\(resealed) of " + counted) under the key \(new), "
                     + "was \(old)" + (outcome.seconds.map { String(format: ", in %.1f s.", $0) } ?? ".")]
        if pass.keyInStateDirectory {
            lines.append("  \(pass.stateDirectory.keyFile.path) holds the new key; the old one opens nothing here any more "
                         + "(keep it only to import exports made before).")
        } else {
            lines.append("  The store key comes from systemd's credential \(pass.source.keyFile.path): install "
                         + "\(pass.target.keyFile.path) as the credential blueskyd-store-key before blueskyd starts again "
                         + "(with the old key it refuses to start, exit 78).")
        }
        if let tenant = pass.source.tenant {
            lines.append("  Every other host of tenant \(tenant) needs the new key before it starts again: put it in place of "
                         + "its store.key (or its credential); a host with the old key is refused (exit 78).")
        }
        return lines.joined(separator: "\n")
    }

    static func json(_ outcome: Outcome, dryRun: Bool) -> String {
        let pass = outcome.pass
        var object: [String: JSONValue] = [
            "store": .string(pass.source.location), "dryRun": .bool(dryRun),
            "keyFingerprint": .string(StoreKey.keyFingerprint(pass.target.key)),
            "previousKeyFingerprint": outcome.survey == nil ? .null : .string(StoreKey.keyFingerprint(pass.source.key)),
            "keyFile": .string(pass.keyInStateDirectory ? pass.stateDirectory.keyFile.path : pass.source.keyFile.path),
            "keyInStateDirectory": .bool(pass.keyInStateDirectory), "alreadySealed": .bool(outcome.survey == nil),
        ]
        if let survey = outcome.survey {
            var kinds: [String: JSONValue] = [:]
            for kind in AuthKind.allCases { kinds[kind.rawValue] = .number(Double(survey.byKind[kind] ?? 0)) }
            object["accounts"] = .number(Double(survey.accounts))
            object["byKind"] = .object(kinds)
            object["clientKeys"] = .number(Double(survey.clientKeys))
            object["nonces"] = .number(Double(survey.nonces))
        }
        object["resealed"] = outcome.resealed.map { .number(Double($0)) }
        object["seconds"] = outcome.seconds.map { .number(($0 * 1000).rounded() / 1000) }
        return String(decoding: JSONValue.object(object).encoded(), as: UTF8.self)
    }
}
