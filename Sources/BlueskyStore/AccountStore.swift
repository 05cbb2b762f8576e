import Crypto
import Foundation
import GRDB
import Logging

/// The registry of accounts: one SQLite database (WAL mode) in a private directory,
/// metadata in clear, tokens sealed with AES-GCM.
///
/// Every method is synchronous and runs one short transaction; call them from an
/// actor or a background task, not from an event loop. Reads run on GRDB's reader
/// pool and do not wait for writes.
public final class AccountStore: AccountStorage {
    /// The database file name inside the store directory.
    public static let databaseFileName = "accounts.sqlite"

    /// Full path of the SQLite database file.
    public let databasePath: String
    let pool: DatabasePool
    let sealer: SecretSealer
    let logger: Logger
    /// Whether writes succeed; the daemon's status shows an outage.
    public let health: StoreHealth
    /// One writer process: its leases are all `localLeaseOwner`'s.
    public let leaseOwner = AccountStore.localLeaseOwner
    /// How long a refresh lease holds. With one host nothing else waits for it; it only says
    /// how old a mark may be before the mark is stale.
    let leaseDuration: TimeInterval = 120

    public var location: String { databasePath }

    /// Opens (creating if needed) the registry in `directory`.
    ///
    /// Opening does no per-row work: it runs pending migrations and sets pragmas only.
    /// - Parameters:
    ///   - directory: created with mode 0700 (an existing one is tightened to 0700).
    ///   - key: the AES-256 key sealing the secrets; see `StoreKey.load`.
    public init(directory: URL, key: SymmetricKey, logger: Logger) throws {
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
            try Self.migrator.migrate(pool)
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError.database(context: "opening \(path)", reason: "\(error)")
        }
        self.databasePath = path
        self.pool = pool
        self.sealer = SecretSealer(key: key)
        self.logger = logger
        self.health = StoreHealth(logger: logger)
        logger.info("account store opened", metadata: [
            "path": "\(path)",
            "key-fingerprint": "\(StoreKey.keyFingerprint(key))",
        ])
    }

    /// Opens the registry; same as `init(directory:key:logger:)`.
    public static func open(directory: URL, key: SymmetricKey, logger: Logger) throws -> AccountStore {
        try AccountStore(directory: directory, key: key, logger: logger)
    }

    /// The writer connection's `PRAGMA synchronous` (2 = FULL), so tests and
    /// diagnostics can prove token commits are durable.
    public func writerSynchronousMode() throws -> Int {
        do {
            return try pool.writeWithoutTransaction { db in
                try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1
            }
        } catch {
            throw StoreError.database(context: "reading the synchronous mode", reason: "\(error)")
        }
    }

    /// Another host never writes a SQLite store: nothing to hear.
    public func observeChanges(_ handler: @escaping @Sendable (StoreChange) -> Void) {}

    /// Closes the database connections. Further calls throw.
    public func close() throws {
        do {
            try pool.close()
        } catch {
            throw StoreError.database(context: "closing \(databasePath)", reason: "\(error)")
        }
    }

    // MARK: - Transactions with error context

    /// Runs `body` in one write transaction, mapping errors to `StoreError`.
    ///
    /// Failures that say nothing about the disk (a missing account, a taken DID) are the
    /// caller's; every other one starts or continues an outage in `health`.
    func performWrite<T>(_ context: String, _ body: (Database) throws -> T) throws -> T {
        assertOffEventLoop(context)
        if let fault = health.injectedFault {
            health.recordFailure(fault)
            throw StoreError.database(context: context, reason: fault)
        }
        do {
            let result = try pool.write(body)
            health.recordSuccess()
            return result
        } catch let error as StoreError {
            if case .database(_, let reason) = error { health.recordFailure(reason) } else { health.recordSuccess() }
            throw error
        } catch let error as DatabaseError where error.resultCode != .SQLITE_CONSTRAINT {
            health.recordFailure(error.message ?? "\(error.resultCode)")
            throw StoreError.database(context: context, reason: "\(error)")
        } catch {
            health.recordFailure("\(error)")
            throw StoreError.database(context: context, reason: "\(error)")
        }
    }

    /// Runs `body` on a reader, mapping errors to `StoreError`.
    func performRead<T>(_ context: String, _ body: (Database) throws -> T) throws -> T {
        assertOffEventLoop(context)
        do {
            return try pool.read(body)
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError.database(context: context, reason: "\(error)")
        }
    }
}
