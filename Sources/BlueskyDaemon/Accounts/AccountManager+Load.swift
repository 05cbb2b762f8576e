import BlueskyStore
import Foundation

extension AccountManager {
    /// Loads every account from the store and builds the schedule: one pass over the rows (no
    /// array of them all), one hop to the scheduler. At 100,000 accounts this is the start-up.
    func loadAll() async throws {
        let clock = ContinuousClock()
        let started = clock.now
        let now = environment.now()
        var load = LoadPass(environment: environment, now: now)
        let expected = try store.count()
        registry.reserveCapacity(expected)
        load.plan.reserveCapacity(expected)
        try store.forEachAccount { record in load.add(record, registry: registry) }
        let read = clock.now
        await scheduler.scheduleAll(load.plan)
        for session in load.endingSoon { await session.warnIfSessionEndsSoon() }
        for record in load.interrupted {
            // The daemon stopped while a refresh was in flight: its outcome is unknown. The
            // server's grace period lets the old refresh token recover; it is refreshed at once.
            logger.warning("a refresh was in flight when blueskyd stopped; refreshing again", metadata: [
                "account": "\(record.id.uuidString.lowercased())", "did": "\(record.did)",
                "startedAt": "\(record.refreshStartedAt?.formatted(.iso8601) ?? "-")", "outcome": "refresh-interrupted",
            ])
        }
        if !load.didOfOAuthAccount.isEmpty {
            environment.oauth.importNonces(try store.allDPoPNonces(), didOf: load.didOfOAuthAccount)
        }
        let count = load.plan.count
        let interrupted = load.interrupted.count
        load = LoadPass(environment: environment, now: now)
        // Loading decoded every row through short-lived allocations; hand the freed pages back
        // so that an idle daemon's resident memory is what it keeps, not what it passed through.
        store.releaseMemory()
        ReleaseFreedMemory.now()
        logger.info("accounts loaded", metadata: [
            "count": "\(count)", "interruptedRefreshes": "\(interrupted)",
            "readSeconds": "\((read - started).seconds)", "totalSeconds": "\((clock.now - started).seconds)",
        ])
    }
}

/// What loading gathers on its way through the rows.
private struct LoadPass {
    let environment: SessionEnvironment
    let now: Date
    var plan: [(id: UUID, due: Date?, host: String)] = []
    var interrupted: [AccountRecord] = []
    var endingSoon: [AccountSession] = []
    var didOfOAuthAccount: [UUID: String] = [:]
    private var interner = StringInterner()
    private var hostOfEndpoint: [String: String] = [:]

    init(environment: SessionEnvironment, now: Date) {
        self.environment = environment
        self.now = now
    }

    mutating func add(_ loaded: AccountRecord, registry: AccountRegistry) {
        let record = interner.intern(loaded)
        let session = AccountSession(record: record, environment: environment,
                                     identityCheckedAt: AccountManager.seededIdentityCheck(now: now))
        registry.insert(session, record: record)
        // With a shared store the store holds the dates: none is worked out here.
        var due = environment.scheduleIsShared ? nil : AccountSession.plannedRefresh(of: record, environment: environment)
        // With a shared store a mark may be another live host's refresh: the claim tells them apart.
        if record.refreshStartedAt != nil, record.state != .needsLogin, !environment.scheduleIsShared {
            interrupted.append(record)
            due = now
        }
        let endpoint = record.oauth?.tokenEndpoint ?? record.pds
        let host = hostOfEndpoint[endpoint] ?? record.refreshHost
        hostOfEndpoint[endpoint] = host
        plan.append((record.id, due, host))
        if record.authKind == .oauth { didOfOAuthAccount[record.id] = record.did }
        if record.state != .needsLogin, record.sessionEndsSoon(now: now) { endingSoon.append(session) }
    }
}
