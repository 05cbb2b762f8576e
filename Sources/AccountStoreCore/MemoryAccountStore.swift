import Foundation
import Logging
import Synchronization

/// The account registry in memory: the third backend, beside SQLite and PostgreSQL, for the
/// contract tests and the daemon's in-process tests. It keeps the same rules (versions, leases,
/// one default, unique DIDs), and several stores sharing one `MemoryDatabase` are several hosts
/// of one shared store: each hears the others' changes.
///
/// A test can hold any write at its start (`holdWrites`), to set up the interleavings a real
/// database only produces by chance, and fail writes as a full disk would (`health`).
public final class MemoryAccountStore: AccountStore {
    public let health: StoreHealth
    public let leaseOwner: String
    public var location: String { "memory" }
    let database: MemoryDatabase
    /// How long a refresh lease holds.
    let leaseDuration: TimeInterval
    /// Shared when several stores (hosts) were opened on one database by the test.
    public var sharedLease: Duration? { database.isShared ? .seconds(leaseDuration) : nil }
    private let writeGate = Mutex<(@Sendable (MemoryWrite) async -> Void)?>(nil)

    public init(database: MemoryDatabase = MemoryDatabase(), leaseOwner: String = "memory",
                leaseDuration: TimeInterval = 60, logger: Logger = Logger(label: "blueskyd.memory-store")) {
        self.database = database
        self.leaseOwner = leaseOwner
        self.leaseDuration = leaseDuration
        self.health = StoreHealth(logger: logger)
    }

    /// Calls `gate` at the start of every write, before it takes effect: a test suspends in it
    /// to let something else happen first. nil: writes go straight through.
    public func holdWrites(_ gate: (@Sendable (MemoryWrite) async -> Void)?) {
        writeGate.withLock { $0 = gate }
    }

    /// Runs one write: the gate, the injected fault, then `body` on the tables under the lock;
    /// the accounts it names are announced to the other stores of the database.
    func write<T: Sendable>(_ kind: MemoryWrite, _ body: (inout MemoryDatabase.Tables) throws(StoreError) -> (T, [UUID]))
        async throws(StoreError) -> T {
        if let gate = writeGate.withLock({ $0 }) { await gate(kind) }
        if let fault = health.injectedFault {
            health.recordFailure(fault)
            throw StoreError.database(context: kind.rawValue, reason: fault)
        }
        let (result, changed) = try database.tables.withLock { tables throws(StoreError) in try body(&tables) }
        health.recordSuccess()
        database.announce(changed, by: leaseOwner)
        return result
    }

    func read<T: Sendable>(_ body: (borrowing MemoryDatabase.Tables) throws(StoreError) -> T) throws(StoreError) -> T {
        try database.tables.withLock { tables throws(StoreError) in try body(tables) }
    }

    public func observeChanges(keeping: @escaping @Sendable () -> Set<UUID>,
                               _ handler: @escaping @Sendable (StoreChange) -> Void) async {
        database.observe(owner: leaseOwner, handler)
    }

    public func close() async {
        database.forget(owner: leaseOwner)
    }

    public func releaseMemory() async {}
}

/// The writes of a `MemoryAccountStore`, as a test holding them sees them.
public enum MemoryWrite: String, Sendable {
    case insert, saveIdentity, replaceSession, setProfile, setDefault, clearDefault, delete
    case claimRefresh, saveRefreshedSession, markState
    case saveDPoPNonces, addClientKey, removeClientKey
}

/// The tables several `MemoryAccountStore`s (hosts) share.
public final class MemoryDatabase: Sendable {
    struct Row: Sendable {
        var record: AccountRecord
        var secrets: AccountSecrets
        var leaseOwner: String?
        var leaseEnds: Date?
    }

    struct Tables: Sendable {
        var rows: [UUID: Row] = [:]
        var nonces: [UUID: [String: StoredDPoPNonce]] = [:]
        var clientKeys: [String: StoredClientKey] = [:]

        func id(ofDID did: String) -> UUID? { rows.values.first { $0.record.did == did }?.record.id }
    }

    let tables = Mutex(Tables())
    private let observers = Mutex<[String: @Sendable (StoreChange) -> Void]>([:])

    /// Whether several hosts share these tables (their leases then matter).
    public let isShared: Bool

    public init(shared: Bool = false) {
        isShared = shared
    }

    func observe(owner: String, _ handler: @escaping @Sendable (StoreChange) -> Void) {
        observers.withLock { $0[owner] = handler }
    }

    func forget(owner: String) {
        observers.withLock { $0[owner] = nil }
    }

    /// Tells every other host's store which accounts changed, after the write (as NOTIFY does
    /// at commit).
    func announce(_ ids: [UUID], by owner: String) {
        guard !ids.isEmpty else { return }
        let others = observers.withLock { $0.filter { $0.key != owner }.map(\.value) }
        for handler in others { for id in ids { handler(.account(id)) } }
    }

    /// Tells every host to read everything again (a lost connection, as the listener reports it).
    public func announceEverything() {
        for handler in observers.withLock({ Array($0.values) }) { handler(.everything) }
    }
}
