import BlueskyStore
import Crypto
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// The account registry in a PostgreSQL database that several blueskyd hosts share.
///
/// The same contract as `AccountStore` (SQLite): secrets sealed with the same store key, commits
/// durable (`synchronous_commit = on`) before a method returns. What several hosts add:
/// - every row belongs to a tenant, and this store sees its own tenant's rows only;
/// - a refresh is claimed with one conditional update (the lease, which is also the
///   write-ahead mark), and rotated tokens are saved only over the version they came from;
/// - every change is announced with `NOTIFY`, and `observeChanges` hears the other hosts'.
public final class PostgresAccountStore: AccountStorage {
    /// The NOTIFY channel; a payload is "tenant owner account-id".
    static let channel = "blueskyd_accounts"
    /// Names the advisory lock under which one tenant's default changes take turns.
    static let defaultLockPrefix = "blueskyd default account of "

    public let health: StoreHealth
    public let leaseOwner: String
    public var location: String { settings.location }
    let settings: PostgresStoreSettings
    let pool: PostgresConnectionPool
    let sealer: SecretSealer
    let logger: Logger
    private let listener: PostgresChangeListener

    /// Connects, brings the schema up to date (one host at a time) and starts listening for
    /// the other hosts' changes.
    /// - Parameter hostName: this host's name in leases and logs (several daemons on one
    ///   machine each add their process id).
    public init(settings: PostgresStoreSettings, key: SymmetricKey, hostName: String, logger: Logger) throws {
        guard key.bitCount == 256 else {
            throw StoreError.keyInvalid(path: settings.location, reason: "the store key must be 256 bits, got \(key.bitCount)")
        }
        self.settings = settings
        self.leaseOwner = "\(hostName)/\(getpid())"
        self.sealer = SecretSealer(key: key)
        self.logger = logger
        self.health = StoreHealth(logger: logger)
        self.pool = try PostgresConnectionPool(settings: settings, logger: logger)
        self.listener = PostgresChangeListener(pool: pool, tenant: settings.tenant, owner: leaseOwner, logger: logger)
        do {
            try migrate()
            try checkClock()
        } catch {
            pool.close()
            if let error = error as? StoreError { throw error }
            throw StoreError.database(context: "preparing \(settings.location)", reason: PostgresErrorText.describe(error))
        }
        logger.info("account store opened", metadata: [
            "store": "\(settings.location)", "tenant": "\(settings.tenant)", "leaseOwner": "\(leaseOwner)",
            "key-fingerprint": "\(StoreKey.keyFingerprint(key))",
        ])
    }

    public func observeChanges(_ handler: @escaping @Sendable (StoreChange) -> Void) {
        listener.start(handler)
    }

    public func close() throws {
        listener.stop()
        pool.close()
    }

    /// Nothing to hand back: the rows live in the server.
    public func releaseMemory() {}

    /// The server's `synchronous_commit` on this store's connections, so tests can prove that
    /// token commits wait for the disk.
    public func synchronousCommit() throws -> String {
        try read("reading synchronous_commit") { session in
            try session.run("SHOW synchronous_commit").rows.first?.decode(String.self) ?? ""
        }
    }

    // MARK: - Statements with error context

    /// Runs `body` in one transaction. A lost connection starts or continues an outage in
    /// `health`; a failure that says nothing about the database (a missing account, a taken
    /// DID) is the caller's.
    func write<T>(_ context: String, _ body: (PostgresSessionHandle) throws -> T) throws -> T {
        if let fault = health.injectedFault {
            health.recordFailure(fault)
            throw StoreError.database(context: context, reason: fault)
        }
        return try observe(context, isWrite: true) { try pool.transaction(body) }
    }

    /// Runs one or more statements outside a transaction. A read that cannot reach the
    /// database starts an outage too; only a write ends one, as with SQLite.
    func read<T>(_ context: String, _ body: (PostgresSessionHandle) throws -> T) throws -> T {
        try observe(context, isWrite: false) { try pool.withConnection(body) }
    }

    private func observe<T>(_ context: String, isWrite: Bool, _ body: () throws -> T) throws -> T {
        do {
            let result = try body()
            if isWrite { health.recordSuccess() }
            return result
        } catch let error as StoreError {
            switch error {
            case .unreachable(_, let reason):
                health.recordFailure(reason)
            case .database(_, let reason) where isWrite:
                health.recordFailure(reason)
            default:
                if isWrite { health.recordSuccess() }
            }
            throw error
        } catch {
            let reason = PostgresErrorText.describe(error)
            if PostgresErrorText.isConnectionLoss(error) {
                health.recordFailure(reason)
                throw StoreError.unreachable(location: settings.location, reason: reason)
            }
            if isWrite, !PostgresErrorText.isConflict(error) { health.recordFailure(reason) }
            throw StoreError.database(context: context, reason: reason)
        }
    }

    /// The prefix of this host's NOTIFY payloads; the account id follows.
    var notifyPrefix: String { "\(settings.tenant) \(leaseOwner) " }
}
