import AccountStoreCore
import Crypto
import Foundation
import GRDB
import Logging

/// The registry of accounts in one SQLite database (WAL mode) in a private directory: metadata
/// in clear, tokens sealed with AES-GCM.
///
/// Every method runs one short transaction on GRDB's own queues (the writer's, or a reader's)
/// and suspends its caller meanwhile: no thread of Swift's cooperative pool or of an event loop
/// waits on the disk. Reads do not wait for writes.
public final class SQLiteAccountStore: AccountStore {
    /// The database file name inside the store directory.
    public static let databaseFileName = "accounts.sqlite"
    /// The lease owner of a single-host store: the instance lock on the state directory already
    /// makes this process the only writer, so a restarted daemon takes its own mark back at once.
    public static let localLeaseOwner = "local"

    /// Full path of the SQLite database file.
    public let databasePath: String
    let pool: DatabasePool
    let sealer: SecretSealer
    let logger: Logger
    public let health: StoreHealth
    public let leaseOwner = SQLiteAccountStore.localLeaseOwner
    /// Only this host writes the file: the lease only marks a refresh in flight.
    public var sharedLease: Duration? { nil }
    /// How long a refresh lease holds. With one host nothing else waits for it; it only says
    /// how old a mark may be before the mark is stale.
    let leaseDuration: TimeInterval = 120

    public var location: String { databasePath }

    /// Opens (creating if needed) the registry in `directory`: runs pending migrations and sets
    /// pragmas, no per-row work. Runs at start, before anything else uses the store.
    /// - Parameters:
    ///   - directory: created with mode 0700 (an existing one is tightened to 0700).
    ///   - key: the AES-256 key sealing the secrets; see `StoreKey.load`.
    public init(directory: URL, key: SymmetricKey, logger: Logger) throws(StoreError) {
        guard key.bitCount == 256 else {
            throw StoreError.keyInvalid(path: directory.path, reason: "the store key must be 256 bits, got \(key.bitCount)")
        }
        let directoryPath = directory.path
        try PrivateFiles.ensureDirectory(directoryPath)
        let path = directory.appendingPathComponent(Self.databaseFileName).path
        try PrivateFiles.ensurePrivateFile(path)
        // Files left by an earlier run (or an older umask) get tightened too.
        try PrivateFiles.tightenIfPresent(path + "-wal")
        try PrivateFiles.tightenIfPresent(path + "-shm")

        var configuration = Configuration()
        configuration.label = "blueskyd.accounts"
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA secure_delete = ON")
        }
        let sealer = SecretSealer(key: key)
        let pool: DatabasePool
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
            // DatabasePool runs `PRAGMA synchronous = NORMAL` on its writer after
            // prepareDatabase (Database.setUpWALMode). NORMAL in WAL mode may lose the
            // last commits on power loss, and a lost commit of a rotated refresh token
            // loses the account. The writer is one long-lived connection, so setting
            // FULL here holds for the life of the pool.
            try pool.barrierWriteWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = FULL")
            }
            try Self.migrator(sealer: sealer).migrate(pool)
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError.database(context: "opening \(path)", reason: "\(error)")
        }
        self.databasePath = path
        self.pool = pool
        self.sealer = sealer
        self.logger = logger
        self.health = StoreHealth(logger: logger)
        logger.info("account store opened", metadata: [
            "path": "\(path)",
            "key-fingerprint": "\(StoreKey.keyFingerprint(key))",
        ])
    }

    /// The writer connection's `PRAGMA synchronous` (2 = FULL), so tests and
    /// diagnostics can prove token commits are durable.
    public func writerSynchronousMode() async throws(StoreError) -> Int {
        try await performWrite("reading the synchronous mode") { db in
            try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1
        }
    }

    /// Another host never writes a SQLite store: nothing to hear.
    public func observeChanges(keeping: @escaping @Sendable () -> Set<UUID>,
                               _ handler: @escaping @Sendable (StoreChange) -> Void) async {}

    /// Closes the database connections. Further calls fail.
    public func close() async {
        do {
            try pool.close()
        } catch {
            logger.error("closing the account store failed", metadata: ["error": "\(error)"])
        }
    }

    public func releaseMemory() async {
        pool.releaseMemoryEventually()
    }

    // MARK: - Transactions with error context

    /// Runs `body` in one write transaction, mapping errors to `StoreError`.
    ///
    /// Failures that say nothing about the disk (a missing account, a taken DID) are the
    /// caller's; every other one starts or continues an outage in `health`.
    func performWrite<T: Sendable>(_ context: String, _ body: @escaping @Sendable (Database) throws -> T)
        async throws(StoreError) -> T {
        if let fault = health.injectedFault {
            health.recordFailure(fault)
            throw StoreError.database(context: context, reason: fault)
        }
        do {
            let result = try await pool.write(body)
            health.recordSuccess()
            return result
        } catch let error as StoreError {
            if case .database(_, let reason) = error { health.recordFailure(reason) } else { health.recordSuccess() }
            throw error
        } catch let error as DatabaseError where error.resultCode != .SQLITE_CONSTRAINT {
            health.recordFailure(error.message ?? "\(error.resultCode)")
            throw StoreError.database(context: context, reason: "\(error)")
        } catch is CancellationError {
            // The caller gave up (a stop cancels the background work): nothing is known of the disk.
            throw StoreError.database(context: context, reason: "cancelled before it was written")
        } catch {
            health.recordFailure("\(error)")
            throw StoreError.database(context: context, reason: "\(error)")
        }
    }

    /// Runs `body` on a reader, mapping errors to `StoreError`.
    func performRead<T: Sendable>(_ context: String, _ body: @escaping @Sendable (Database) throws -> T)
        async throws(StoreError) -> T {
        do {
            return try await pool.read(body)
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError.database(context: context, reason: "\(error)")
        }
    }
}
