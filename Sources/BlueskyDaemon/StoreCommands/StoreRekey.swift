import AccountStoreCore
import Crypto
import Foundation
import Logging
import PostgresStore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `blueskyd store rekey`: the configured store sealed again, whole, under a new key, so that a
/// key that leaked opens nothing any more, and no account needs a login.
///
/// The pass is a copy of the store onto itself (`store copy`'s code): every row read under the
/// old key, checked, and written under the new one, the store replaced in one step (a SQLite
/// file moved over the old one, or one PostgreSQL transaction that deletes the tenant's rows and
/// writes them anew). The new key is put beside the old one first (`store.key.next`) and moved
/// over it last; a kill in between is settled by the next start or rekey, whichever key then
/// opens the store (`Daemon.openCheckedStore`). The store is held still, as for a copy: the
/// instance lock, or no live host of the tenant.
public struct StoreRekey: StoreSubcommand {
    public struct Options: Sendable {
        /// The new key (32 raw bytes, 64 hex characters or base64), which must exist.
        public var newKeyFile = ""
        public var dryRun = false
        public var json = false
        public init() {}
    }

    let configuration: DaemonConfiguration
    let options: Options
    let logger: Logger

    static let name = "rekey"

    /// Runs the command; returns its exit status (sysexits).
    public static func run(_ overrides: DaemonOverrides, options: Options) async -> Int32 {
        await runOnce(overrides, options: options)
    }

    func run() async throws(DaemonStartupError) {
        guard !options.newKeyFile.isEmpty else { throw DaemonStartupError("--new-key-file names the new key", exitCode: .usage) }
        let newKeyFile = URL(fileURLWithPath: options.newKeyFile)
        let newKey = try StoreEndpoint.existingKey(newKeyFile)
        // A key replacing one that leaked must be one nobody can guess (32 random bytes hold
        // fewer than 16 distinct values with a chance below 10^-20).
        let distinct = StoreKey.distinctBytes(newKey)
        guard distinct >= 16 else {
            throw DaemonStartupError("\(newKeyFile.path) is no random key (\(distinct) distinct byte values in 32): make one with "
                                     + "`umask 077; openssl rand -hex 32 > new.key`", exitCode: .configuration)
        }
        let place = try StoreEndpoint.configuredPlace(configuration, fallbackTenant: configuration.tenant ?? Daemon.unixUserName())
        let stateDirectory: StateDirectory
        do {
            stateDirectory = try StateDirectory(path: URL(fileURLWithPath: configuration.stateDirectory))
        } catch {
            throw DaemonStartupError("cannot use the state directory \(configuration.stateDirectory): \(error)", exitCode: .configuration)
        }
        guard newKeyFile.standardizedFileURL.path != stateDirectory.keyFile.standardizedFileURL.path,
              newKeyFile.standardizedFileURL.path != stateDirectory.nextKeyFile.standardizedFileURL.path else {
            throw DaemonStartupError("--new-key-file is the state directory's own key file: keep the new key elsewhere "
                                     + "(e.g. umask 077; openssl rand -hex 32 > new.key)", exitCode: .usage)
        }
        let lock = try StoreEndpoint(place: place, key: newKey, keyFile: newKeyFile).lock(role: "store")
        defer { withExtendedLifetime(lock) {} }
        let daemon = Daemon(configuration: configuration, logger: logger)
        // An earlier rekey killed before it ended is settled first: the key that opens the store.
        // The new key opens rows too: a pass while hosts ran may have resealed some before it stopped.
        let (store, key, keyFile) = try await daemon.openCheckedStore(stateDirectory: stateDirectory, alsoOpening: [newKey])
        let source = StoreEndpoint(place: place, key: key, keyFile: URL(fileURLWithPath: StoreKey.source(keyFile: keyFile)))
        let target = StoreEndpoint(place: place, key: newKey, keyFile: newKeyFile)
        let pass = Pass(source: source, target: target, store: store, stateDirectory: stateDirectory,
                        keyInStateDirectory: source.keyFile.path == stateDirectory.keyFile.path)
        do {
            try await rekey(pass, daemon: daemon)
        } catch {
            await store.close()
            throw error
        }
        await store.close()
    }

    /// What one rekey works on: the store open under its current key (`source`), the new key
    /// (`target`), and whether the key is the state directory's file (else systemd's credential,
    /// which the operator replaces).
    struct Pass {
        let source: StoreEndpoint
        let target: StoreEndpoint
        let store: any AccountStore
        let stateDirectory: StateDirectory
        let keyInStateDirectory: Bool
    }

    private func rekey(_ pass: Pass, daemon: Daemon) async throws(DaemonStartupError) {
        let (source, target, store) = (pass.source, pass.target, pass.store)
        // Nothing to do when the store is sealed with the new key already; for a shared store,
        // whose rows a rekey while hosts ran may have moved to another key than store.key (a
        // rollback to the key in store.key is a rekey too), when the tenant and every row say so.
        guard try await sealedOtherwise(store, of: source, than: target.key) else {
            report(Outcome(pass: pass, survey: nil, resealed: nil, seconds: nil))
            return
        }
        // A PostgreSQL tenant whose hosts run is resealed under them, row by row.
        if let shared = store as? PostgresAccountStore {
            let hosts = try await source.reading { () throws(StoreError) in try await shared.liveHostKeys() }
            if !hosts.isEmpty { return try await rekeyWhileHostsRun(pass, hosts: hosts, daemon: daemon) }
        }
        let survey = try await source.checkStill(store, doing: "rekey")
        if options.dryRun {
            report(Outcome(pass: pass, survey: survey, resealed: nil, seconds: nil))
            return
        }
        let started = ContinuousClock.now
        if pass.keyInStateDirectory { try installNextKey(pass) }
        let progress = CopyProgress(total: survey.accounts, shown: !options.json && isatty(STDERR_FILENO) == 1, verb: "resealed")
        let resealed = Mutex(0)
        let input = StoreEndpoint.InputFailure()
        // A failure leaves `store.key.next` for the next start or rekey to settle: a connection
        // lost as the transaction committed leaves the store sealed with either key.
        try await target.importRegistry(extras: survey.extras, daemon: daemon, logger: logger, input: input,
                                        replacing: store) { writer throws(StoreError) in
            let count = try await RegistryCopy.copyAccounts(from: store, into: writer, progress: { progress.show($0) },
                                                               sourceFailed: { input.record(source.readFailure($0)) })
            resealed.withLock { $0 = count }
            try await source.stillAtEnd(store, input: input)
        }
        progress.finish()
        if pass.keyInStateDirectory { try moveNextKeyIn(pass) }
        report(Outcome(pass: pass, survey: survey, resealed: resealed.withLock { $0 },
                       seconds: (ContinuousClock.now - started).seconds))
    }

    /// Whether `store` (opened as `source`) holds anything sealed under another key than `key`.
    private func sealedOtherwise(_ store: any AccountStore, of source: StoreEndpoint, than key: SymmetricKey)
        async throws(DaemonStartupError) -> Bool {
        let sameAsStoreKey = source.key == key
        guard let shared = store as? PostgresAccountStore else { return !sameAsStoreKey }
        let fingerprint = StoreKey.keyFingerprint(key)
        let (named, left) = try await source.reading { () throws(StoreError) in
            (try await shared.sealingKeys().tenant, try await shared.rowsUnderOtherKeys(than: fingerprint))
        }
        // A tenant that names no key has every row under its hosts' store.key (each start checks it).
        guard let named else { return !sameAsStoreKey }
        return named != fingerprint || left > 0
    }

    /// The new key beside the old, durable before any row is sealed under it.
    private func installNextKey(_ pass: Pass) throws(DaemonStartupError) {
        let file = pass.stateDirectory.nextKeyFile
        guard unlink(file.path) == 0 || errno == ENOENT else {
            throw DaemonStartupError("cannot remove \(file.path), left by an earlier rekey: \(String(cString: strerror(errno))); "
                                     + "remove it (the store opens with store.key); nothing was resealed", exitCode: .cannotCreate)
        }
        do {
            guard try StoreKey.install(pass.target.key, keyFile: file) else {
                throw DaemonStartupError("\(file.path) appeared while the rekey wrote it: is another rekey running?",
                                         exitCode: .alreadyRunning)
            }
        } catch let error as DaemonStartupError {
            throw error
        } catch {
            throw DaemonStartupError("cannot write the new key to \(file.path): \(error); nothing was resealed", exitCode: .cannotCreate)
        }
    }

    /// The new key over the old, once the store is sealed with it.
    private func moveNextKeyIn(_ pass: Pass) throws(DaemonStartupError) {
        let (next, key) = (pass.stateDirectory.nextKeyFile.path, pass.stateDirectory.keyFile.path)
        guard rename(next, key) == 0 else {
            throw DaemonStartupError("the store is sealed with the new key, but \(next) cannot be moved over \(key): "
                                     + "\(String(cString: strerror(errno))); blueskyd's next start moves it", exitCode: .cannotCreate)
        }
        PrivateFiles.syncDirectory(pass.stateDirectory.url.path)
    }
}
