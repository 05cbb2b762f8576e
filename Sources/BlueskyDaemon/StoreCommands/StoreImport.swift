import AccountStoreCore
import Crypto
import Foundation
import WebBasics
import JSONRPC
import Logging
import PostgresStore
import SQLiteStore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `blueskyd store import`: an export file into the configured store, whole or not at all: a
/// file damaged anywhere, cut short, of a later format or sealed with another key is refused,
/// and the store is left as it was. The store must hold no account, unless `--merge` (each
/// account then keeps its newer session: a refresh token in an older export may be spent).
public struct StoreImport: StoreSubcommand {
    public struct Options: Sendable {
        public var from = ""
        /// The key the export was sealed with; default the store's own.
        public var keyFile: String?
        /// Into a store that holds accounts: each account keeps its newer session.
        public var merge = false
        /// After the import, each restored session tried once against its server (`ImportCheck`).
        public var check = false
        public var dryRun = false
        public var json = false
        public init() {}
    }

    let configuration: DaemonConfiguration
    let options: Options
    let logger: Logger

    static let name = "import"

    /// Runs the command; returns its exit status (sysexits).
    public static func run(_ overrides: DaemonOverrides, options: Options) async -> Int32 {
        await runOnce(overrides, options: options)
    }

    func run() async throws(DaemonStartupError) {
        guard !options.from.isEmpty else { throw DaemonStartupError("--from names the export file", exitCode: .usage) }
        guard !(options.check && options.dryRun) else {
            throw DaemonStartupError("--check tries the sessions an import restored, and a dry run restores none: give one of them",
                                     exitCode: .usage)
        }
        let given = try options.keyFile.map { path throws(DaemonStartupError) in try StoreEndpoint.existingKey(URL(fileURLWithPath: path)) }
        let place = try StoreEndpoint.configuredPlace(configuration, fallbackTenant: configuration.tenant ?? Daemon.unixUserName())
        let own = try StoreEndpoint.daemonKeyIfAny(configuration)
        guard let exportKey = given ?? own?.0 else {
            throw DaemonStartupError("no store key at \(configuration.stateDirectory)/store.key: give the key the export was "
                                     + "sealed with (--key-file)", exitCode: .configuration)
        }
        let (path, key) = (options.from, exportKey)
        let reader = try await Self.reading { () throws(ExportFileError) in try ExportFileReader(path: path, storeKey: key) }
        defer { reader.close() }
        let extras = try await Self.reading { () throws(ExportFileError) in try reader.extras() }
        // The store keeps its own key; a new state directory gets the export's.
        let keyFile = URL(fileURLWithPath: configuration.stateDirectory).appendingPathComponent("store.key")
        let target = StoreEndpoint(place: place, key: own?.0 ?? exportKey, keyFile: own?.1 ?? keyFile)
        let lock = try target.lock(role: "store")
        defer { withExtendedLifetime(lock) {} }
        let daemon = Daemon(configuration: configuration, logger: logger)
        if options.check {
            // What the check needs of the configuration (its CA file, nameservers, PLC URL) is
            // refused now, before anything is written, not after the import committed.
            try daemon.checkLease()
            try await daemon.outboundClients().shutdown()
        }
        let merging = options.merge ? try await target.openForMerge(daemon: daemon) : nil
        if options.dryRun {
            await merging?.store.close()
            var accounts = 0
            while let batch = try await Self.reading({ () throws(ExportFileError) in try reader.nextAccounts() }) {
                accounts += batch.count
                for account in batch { _ = merging?.merge.admit(account) }
            }
            if merging == nil { try await target.checkEmpty(daemon: daemon) }
            say(accounts: accounts, extras: extras, into: nil, seconds: nil, merge: merging?.merge)
            return
        }
        let started = ContinuousClock.now
        let input = StoreEndpoint.InputFailure()
        let imported = Mutex(0)
        let produce: @Sendable (any RegistryWriter) async throws(StoreError) -> Void = { writer throws(StoreError) in
            while true {
                let batch: [PortableAccount]?
                do throws(ExportFileError) {
                    batch = try await ExportFileThread.run { () throws(ExportFileError) in try reader.nextAccounts() }
                } catch {
                    input.record(Self.refusal(error))
                    throw StoreError.database(context: "importing", reason: error.description)
                }
                guard let batch else { return }
                try await writer.write(batch)
                imported.withLock { $0 += batch.count }
            }
        }
        var renumbered: [UUID: UUID] = [:]
        if let merging {
            try await target.mergeRegistry(merging, sourceExtras: extras, daemon: daemon, logger: logger, input: input, produce)
        } else {
            // A tenant's host state directory without a key gets the export's, as a state directory does.
            let keyHome = own == nil ? try daemon.startup(StateDirectory(path: URL(fileURLWithPath: configuration.stateDirectory)))
                : nil
            renumbered = try await target.importRegistry(extras: extras, daemon: daemon, logger: logger, input: input,
                                                         keyHome: keyHome, produce)
        }
        let seconds = (ContinuousClock.now - started).seconds
        var checked: [ImportCheck.Line]?
        var checkFailure: DaemonStartupError?
        if options.check {
            do throws(DaemonStartupError) {
                checked = try await check(daemon: daemon, merge: merging?.merge)
            } catch {
                checkFailure = error
            }
        }
        // The import stands whatever the check met: its report first, then why the check could not run.
        say(accounts: imported.withLock { $0 }, extras: extras, into: target, seconds: seconds, merge: merging?.merge,
            checked: checked, renumbered: Self.sorted(renumbered))
        if let checkFailure { throw checkFailure }
    }

    /// `--check`: the store opened as a start opens it (the instance lock is still held), each
    /// session the import brought tried once, then closed as a stop closes it.
    private func check(daemon: Daemon, merge: RegistryMerge?) async throws(DaemonStartupError) -> [ImportCheck.Line] {
        let directory = try daemon.startup(StateDirectory(path: URL(fileURLWithPath: configuration.stateDirectory)))
        let core: DaemonCore
        do throws(DaemonStartupError) {
            core = try await daemon.startCore(stateDirectory: directory)
        } catch {
            throw DaemonStartupError("the import is complete, but its sessions cannot be checked: \(error.description)",
                                     exitCode: error.exitCode)
        }
        // A merge's accounts whose session stayed the target's were not restored: not tried.
        let only = merge.map { merge in
            Set(merge.decisions.filter { $0.kept == .source }.map(\.did) + merge.added)
        }
        let lines = await ImportCheck(core: core, only: only).run(progress: isatty(STDERR_FILENO) == 1 && !options.json)
        await core.close(logger: logger)
        return lines
    }

    /// `body` (the file's blocking reads) off the cooperative pool, its refusal as one line.
    static func reading<T: Sendable>(_ body: @escaping @Sendable () throws(ExportFileError) -> T) async throws(DaemonStartupError) -> T {
        do {
            return try await ExportFileThread.run(body)
        } catch {
            throw refusal(error)
        }
    }

    static func refusal(_ error: ExportFileError) -> DaemonStartupError {
        switch error {
        case .anotherKey: DaemonStartupError(error.description, exitCode: .configuration)
        case .unreadable: DaemonStartupError(error.description, exitCode: .noInput)
        default: DaemonStartupError(error.description, exitCode: .dataError)
        }
    }

    private func say(accounts: Int, extras: RegistryExtras, into target: StoreEndpoint?, seconds: Double?, merge: RegistryMerge?,
                     checked: [ImportCheck.Line]? = nil, renumbered: [(key: UUID, value: UUID)] = []) {
        var output: String
        if options.json {
            var object: [String: JSONValue] = [
                "from": .string(options.from), "dryRun": .bool(target == nil), "accounts": .number(Double(accounts)),
                "clientKeys": .number(Double(extras.clientKeys.count)), "nonces": .number(Double(extras.nonces.count)),
            ]
            object["to"] = target.map { .string($0.location) }
            object["seconds"] = seconds.map { .number(($0 * 1000).rounded() / 1000) }
            object["merge"] = merge?.json
            object["check"] = checked.map(ImportCheck.json)
            if target != nil { object["renumbered"] = Self.renumberedJSON(renumbered) }
            output = String(decoding: JSONValue.object(object).encoded(), as: UTF8.self)
        } else {
            let what = "\(accounts) account\(accounts == 1 ? "" : "s"), \(extras.clientKeys.count) OAuth client key(s), "
                + "\(extras.nonces.count) DPoP nonce(s)"
            output = target.map { "Imported \(what) from \(options.from) into \($0.location)"
                + (seconds.map { String(format: " in %.1f s", $0) } ?? "") + ".\n  A refresh token in an older export may be "
                + "spent: an account whose session ended since needs a login (bskyctl status shows it)." }
                ?? "Dry run: \(options.from) holds \(what), whole and sealed with this key, and the store "
                    + (merge == nil ? "is empty" : "takes them") + "; nothing was written."
            if let merge { output += "\n" + merge.summary }
            if !renumbered.isEmpty { output += "\n" + Self.renumberedText(renumbered) }
            if let checked { output += "\n" + ImportCheck.summary(checked) }
        }
        FileHandle.standardOutput.write(Data((output + "\n").utf8))
    }
}
