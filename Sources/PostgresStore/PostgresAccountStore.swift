import AccountStoreCore
import Crypto
import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// The account registry in a PostgreSQL database that several blueskyd hosts share.
///
/// The same contract as `SQLiteAccountStore`: secrets sealed with the same store key, commits
/// durable (`synchronous_commit = on`) before a method returns. What several hosts add:
/// - every row belongs to a tenant, and this store sees its own tenant's rows only;
/// - a refresh is claimed with one conditional update (the lease, which is also the
///   write-ahead mark), and rotated tokens are saved only over the version they came from;
/// - every change is announced with `NOTIFY`, and `observeChanges` hears the other hosts'.
///
/// Statements go through postgres-nio's `PostgresClient`, each operation under one deadline
/// (`PostgresDatabase`): nothing waits on a thread, and nothing waits on a silent database
/// for longer than the deadline.
public final class PostgresAccountStore: AccountStore {

    public let health: StoreHealth
    public let leaseOwner: String
    public var location: String { settings.location }
    public var sharedLease: Duration? { .seconds(settings.leaseDuration) }
    let settings: PostgresStoreSettings
    let database: PostgresDatabase
    /// The keys this host holds, sealing with the tenant's writing key (`blueskyd_tenant_key`,
    /// read at start and at every beat; the first key when the tenant names none). Read once
    /// per write, so that a value and the key it names (`sealed_by`) never disagree.
    var sealer: SecretSealer { sealing.withLock { $0 } }
    let sealing: Mutex<SecretSealer>
    /// The fingerprint of the first key (`store.key`): the writing key of a tenant that names none.
    let firstKey: String
    /// The key the tenant names, as last read (at start, at each beat).
    let tenantKey = Mutex<String?>(nil)
    /// Whether `close` has begun: a second close (a caller's and its harness's) does nothing.
    private let closing = Mutex(false)
    /// Rows per key, as last counted (`sealingKeysNow`), and whether a count is under way.
    let rowCounts = Mutex<RowCounts>(RowCounts())
    /// The tenant's NOTIFY channel and the signatures of its payloads, one per key this host
    /// holds (`store.key`'s first): a change is announced on each, so that during a rekey while
    /// hosts run, hosts on the old key, on both, and on the new one alone all hear it.
    let signers: [ChangeSigner]
    let logger: Logger
    private let listener: PostgresChangeListener
    /// Whether this host's clock drifted from the database's while running (said once per episode).
    let clockWatch = ClockWatch()
    /// Tests only: runs between a claim's read and its write, so that a test can change the
    /// row in between.
    package let claimRaceHook = Mutex<(@Sendable () async -> Void)?>(nil)
    /// Claims whose compare-and-set found the row changed and went the locked way: a test's
    /// proof of which way a claim went.
    package let lockedClaims = Atomic<Int>(0)
    /// Claims granted by the one statement (`claimRefreshAlone`), the rest decided by a read.
    package let aloneClaims = Atomic<Int>(0)

    /// Connects, brings the schema up to date (one host at a time) and checks this host's clock.
    /// - Parameter hostName: this host's name in leases and logs; a random suffix makes the
    ///   lease owner unique to this start of this process.
    /// - Parameter otherKeys: keys this host opens rows with besides `key` (an installed
    ///   `store.key.new` during a rekey while hosts run), and writes with once the tenant says so.
    public init(settings: PostgresStoreSettings, key: SymmetricKey, otherKeys: [SymmetricKey] = [], hostName: String,
                logger: Logger) async throws(StoreError) {
        for key in [key] + otherKeys where key.bitCount != 256 {
            throw StoreError.keyInvalid(path: settings.location, reason: "the store key must be 256 bits, got \(key.bitCount)")
        }
        self.settings = settings
        self.leaseOwner = "\(hostName)/\(Self.startNonce())"
        self.sealing = Mutex(SecretSealer(sealingWith: key, alsoOpening: otherKeys))
        self.firstKey = StoreKey.keyFingerprint(key)
        let signers = ([key] + otherKeys).map { ChangeSigner(storeKey: $0, tenant: settings.tenant) }
            .reduce(into: [ChangeSigner]()) { unique, signer in
                if !unique.contains(where: { $0.channel == signer.channel }) { unique.append(signer) }
            }
        self.signers = signers
        self.logger = logger
        self.health = StoreHealth(logger: logger)
        let configuration = try PostgresConnections.clientConfiguration(settings)
        self.database = PostgresDatabase(configuration: configuration, location: settings.location,
                                         deadline: .seconds(settings.statementTimeout), logger: logger) {
            await PostgresConnections.probe(settings, logger: logger)
        }
        self.listener = PostgresChangeListener(settings: settings, signers: signers, owner: leaseOwner, logger: logger,
                                               checkInterval: .seconds(min(10, settings.leaseDuration / 4)))
        do throws(StoreError) {
            // A store that cannot be reached says why at start: the pool itself only waits.
            if let reason = await PostgresConnections.probe(settings, logger: logger) {
                throw StoreError.unreachable(location: settings.location, reason: reason)
            }
            try await migrate()
            try await checkTenantRole()
            try await adoptWritingKey()
            try await checkClock()
            // Counted once now, so that the first status has them (later ones count in the background).
            if let report = try? await sealingKeys() {
                rowCounts.withLock { $0 = RowCounts(rows: report.rows, at: .now, countedAt: Date()) }
            }
        } catch {
            await database.close()
            throw error
        }
        logger.info("account store opened", metadata: [
            "store": "\(settings.location)", "tenant": "\(settings.tenant)", "leaseOwner": "\(leaseOwner)",
            "key-fingerprint": "\(StoreKey.keyFingerprint(key))", "writing-key": "\(sealer.writingFingerprint)",
        ])
    }

    /// Eight random hex digits: two processes started alike (a container image, pid 1 each)
    /// still hold leases under different names.
    private static func startNonce() -> String {
        String(UInt32.random(in: 0...UInt32.max), radix: 16).leftPadded(to: 8)
    }

    /// Starts hearing the other hosts' changes, and saying this host is alive (on the same
    /// connection, every `beat`, with the clocks compared each time).
    public func observeChanges(keeping: @escaping @Sendable () -> Set<UUID>,
                               _ handler: @escaping @Sendable (StoreChange) -> Void) async {
        await listener.start(handler) { [self] connection in
            let databaseNow = try await heartbeat(on: connection, keeping: keeping())
            clockWatch.compare(skew: Date().timeIntervalSince(databaseNow), leaseDuration: settings.leaseDuration, logger: logger)
        }
    }

    public func close() async {
        guard closing.withLock({ (closing: inout Bool) -> Bool in defer { closing = true }; return !closing }) else { return }
        await listener.stop()
        await forgetLiveness()
        await database.close()
    }

    /// Nothing to hand back: the rows live in the server.
    public func releaseMemory() async {}

    /// The server's `synchronous_commit` on this store's connections, so tests can prove that
    /// token commits wait for the disk.
    public func synchronousCommit() async throws(StoreError) -> String {
        try await read("reading synchronous_commit") { session in
            try await session.run("SHOW synchronous_commit").first?.decode(String.self) ?? ""
        }
    }

    // MARK: - Statements with error context

    /// Runs `body` in one transaction. A lost connection (or one closed at the deadline)
    /// starts or continues an outage in `health`; a failure that says nothing about the
    /// database (a missing account, a taken DID) is the caller's.
    @discardableResult
    func write<T: Sendable>(_ context: String, deadline: Duration? = nil,
                            _ body: @escaping @Sendable (PostgresSession) async throws -> T) async throws(StoreError) -> T {
        if let fault = health.injectedFault {
            health.recordFailure(fault)
            throw StoreError.database(context: context, reason: fault)
        }
        return try await observe(context, isWrite: true) { try await self.database.transaction(deadline: deadline, body) }
    }

    /// Runs `body`'s statements outside a transaction, each committed on its own: a write of
    /// one statement then costs one round trip, not three (BEGIN, the statement, COMMIT). As
    /// with `write`, a lost connection starts or continues an outage in `health`.
    @discardableResult
    func writeAlone<T: Sendable>(_ context: String, _ body: @escaping @Sendable (PostgresSession) async throws -> T)
        async throws(StoreError) -> T {
        if let fault = health.injectedFault {
            health.recordFailure(fault)
            throw StoreError.database(context: context, reason: fault)
        }
        return try await observe(context, isWrite: true) { try await self.database.withConnection(body) }
    }

    /// Runs one or more statements outside a transaction. A read that cannot reach the
    /// database starts an outage too; only a write ends one, as with SQLite.
    func read<T: Sendable>(_ context: String, _ body: @escaping @Sendable (PostgresSession) async throws -> T)
        async throws(StoreError) -> T {
        try await observe(context, isWrite: false) { try await self.database.withConnection(body) }
    }

    private func observe<T>(_ context: String, isWrite: Bool, _ body: () async throws -> T) async throws(StoreError) -> T {
        do {
            let result = try await body()
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
        } catch is CancellationError {
            // The caller gave up (a stop cancels the background work): nothing is known of the database.
            throw StoreError.database(context: context, reason: "cancelled before it was written")
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
}

extension String {
    func leftPadded(to length: Int) -> String {
        count >= length ? self : String(repeating: "0", count: length - count) + self
    }
}
