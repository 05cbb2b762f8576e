import AccountStoreCore
import Crypto
import Foundation
import JSONRPC
import Logging

/// `blueskyd store reseal`: shows the rows whose metadata seal does not hold and, on the
/// operator's word, seals those that may be sealed (written before blueskyd sealed rows, their
/// secrets opening under the key). No start seals anything (docs/SECURITY.md, "Rows").
public struct StoreReseal: StoreSubcommand {
    public struct Options: Sendable {
        /// Seal every row that may be sealed.
        public var all = false
        /// Seal these (UUIDs); each must be one that may be sealed.
        public var accounts: [String] = []
        /// Show, seal nothing.
        public var dryRun = false
        public var json = false
        public init() {}
    }

    let configuration: DaemonConfiguration
    let options: Options
    let logger: Logger

    /// Runs the command; returns its exit status (sysexits).
    static let name = "reseal"

    /// Runs the command; returns its exit status (sysexits).
    public static func run(_ overrides: DaemonOverrides, options: Options) async -> Int32 {
        await runOnce(overrides, options: options)
    }

    func run() async throws(DaemonStartupError) {
        let stateDirectory: StateDirectory
        do {
            stateDirectory = try StateDirectory(path: URL(fileURLWithPath: configuration.stateDirectory))
        } catch {
            throw DaemonStartupError("cannot use the state directory \(configuration.stateDirectory): \(error)")
        }
        // SQLite: the daemon must be stopped (it holds the instance lock); PostgreSQL: hosts may
        // run, each sealed row is announced to them.
        var lock: InstanceLock?
        if configuration.storeURL == nil {
            do {
                lock = try stateDirectory.acquireInstanceLock()
            } catch let error as StoreError {
                if case .alreadyRunning = error {
                    throw DaemonStartupError("\(error.description): stop it first (systemctl --user stop blueskyd)", exitCode: .alreadyRunning)
                }
                throw DaemonStartupError(error.description)
            } catch {
                throw DaemonStartupError(String(describing: error))
            }
        }
        defer { withExtendedLifetime(lock) {} }
        let keyFile = stateDirectory.keyFile
        let environment = ProcessInfo.processInfo.environment
        let credential = environment["CREDENTIALS_DIRECTORY"].map { $0 + "/blueskyd-store-key" }
        guard FileManager.default.fileExists(atPath: keyFile.path) || credential.map(FileManager.default.fileExists) == true else {
            throw DaemonStartupError("no store key at \(keyFile.path): reseal with the key the accounts were sealed with",
                                     exitCode: .configuration)
        }
        let key: SymmetricKey
        do {
            key = try StoreKey.load(keyFile: keyFile)
        } catch {
            throw DaemonStartupError(String(describing: error), exitCode: .configuration)
        }
        let daemon = Daemon(configuration: configuration, logger: logger)
        let store = try await daemon.openStore(stateDirectory: stateDirectory, key: key, keyFile: keyFile)
        do {
            try await reseal(store, key: key, keyFile: keyFile)
        } catch {
            await store.close()
            throw error
        }
        await store.close()
    }

    private func reseal(_ store: any AccountStore, key: SymmetricKey, keyFile: URL) async throws(DaemonStartupError) {
        let found: [UnsealedAccount]
        do {
            found = try await store.unsealedAccounts()
        } catch {
            throw DaemonStartupError("cannot read \(store.location): \(error)")
        }
        if !found.isEmpty, found.allSatisfy({ $0.finding == .secretsDoNotOpen }), try await allOfStore(store, count: found.count) {
            throw Daemon.wrongStoreKey(keyFile: keyFile, location: store.location)
        }
        var chosen: [UUID] = []
        if options.all {
            chosen = found.filter(\.mayBeSealed).map(\.record.id)
        }
        for text in options.accounts {
            guard let id = UUID(uuidString: text) else {
                throw DaemonStartupError("'\(text)' is not an account's UUID (the first column below)", exitCode: .usage)
            }
            guard let row = found.first(where: { $0.record.id == id }) else {
                throw DaemonStartupError("account \(text) needs no seal (or is not in \(store.location))", exitCode: .usage)
            }
            guard row.mayBeSealed else { throw DaemonStartupError("account \(text) cannot be sealed: \(row.explanation)", exitCode: .usage) }
            chosen.append(id)
        }
        var sealed: [UUID] = []
        if !options.dryRun, !chosen.isEmpty {
            do {
                sealed = try await store.sealAccounts(chosen, at: Date())
            } catch {
                throw DaemonStartupError("cannot seal in \(store.location): \(error)")
            }
        }
        print(options.json ? Self.json(found, sealed: sealed, dryRun: options.dryRun) : text(found, sealed: sealed, chosen: chosen))
    }

    /// Whether `count` rows are every row of the store (then the key, not the rows, is wrong).
    private func allOfStore(_ store: any AccountStore, count: Int) async throws(DaemonStartupError) -> Bool {
        do {
            return try await store.count() == count
        } catch {
            throw DaemonStartupError("cannot read \(store.location): \(error)")
        }
    }

    private func text(_ found: [UnsealedAccount], sealed: [UUID], chosen: [UUID]) -> String {
        guard !found.isEmpty else { return "Every account's seal holds: nothing to do." }
        var lines = ["\(found.count) account(s) whose seal does not hold (check where each sends its tokens):"]
        for row in found {
            let record = row.record
            // Shown as stored, but never as the terminal would take it: a row's values are the
            // intruder's to write (a carriage return and an erase could show another PDS).
            // The handle and the default pick an account by name: a seal makes them the row's word.
            var line = "  \(record.id.uuidString.lowercased())  \(Self.visible(record.did))  \(Self.visible(record.handle ?? "-"))"
                + (record.handleVerified ? " (verified)" : "") + (record.isDefault ? "  DEFAULT" : "")
                + "  pds=\(Self.visible(record.pds))"
            if let oauth = record.oauth { line += "  issuer=\(Self.visible(oauth.issuer)) token=\(Self.visible(oauth.tokenEndpoint))" }
            lines.append(line)
            lines.append("      \(sealed.contains(record.id) ? "sealed now" : row.explanation)")
        }
        if options.dryRun {
            lines.append("Dry run: nothing was sealed.")
        } else if chosen.isEmpty {
            let may = found.filter(\.mayBeSealed).count
            lines.append(may == 0 ? "None may be sealed: those accounts need a new login (bskyctl login)."
                : "Nothing sealed: name the accounts to seal (--account <uuid>) or seal every one that may be (--all).")
        } else {
            lines.append("Sealed \(sealed.count) account(s).")
        }
        return lines.joined(separator: "\n")
    }

    /// `text` with every control character and every non-ASCII one written as an escape
    /// (`\u{1B}`), so that what the operator reads is what the row holds.
    static func visible(_ text: String) -> String {
        var shown = ""
        for scalar in text.unicodeScalars {
            if scalar.value >= 0x20, scalar.value < 0x7F, scalar != "\\" {
                shown.unicodeScalars.append(scalar)
            } else {
                shown += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            }
        }
        return shown
    }

    static func json(_ found: [UnsealedAccount], sealed: [UUID], dryRun: Bool) -> String {
        let accounts: [JSONValue] = found.map { row in
            var object: [String: JSONValue] = [
                "id": .string(row.record.id.uuidString.lowercased()), "did": .string(row.record.did), "pds": .string(row.record.pds),
                "finding": .string(row.finding.rawValue), "explanation": .string(row.explanation),
                "sealed": .bool(sealed.contains(row.record.id)),
            ]
            object["handle"] = row.record.handle.map(JSONValue.string)
            object["handleVerified"] = .bool(row.record.handleVerified)
            object["isDefault"] = .bool(row.record.isDefault)
            object["issuer"] = row.record.oauth.map { .string($0.issuer) }
            return .object(object)
        }
        return String(decoding: JSONValue.object(["accounts": .array(accounts), "sealed": .number(Double(sealed.count)),
                                                   "dryRun": .bool(dryRun)]).encoded(), as: UTF8.self)
    }
}
