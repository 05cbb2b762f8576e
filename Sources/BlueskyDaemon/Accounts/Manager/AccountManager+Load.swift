import AccountStoreCore
import Foundation

extension AccountManager {
    /// Loads every account from the store a page at a time (no array of them all); the
    /// sessions' first dates go to the scheduler at once after the last page. At 100,000
    /// accounts this is the start-up. The rows come in the store's fastest order; what an order
    /// would decide (which of two rows holding one handle names it) is settled after.
    func loadAll() async throws {
        let clock = ContinuousClock()
        let started = clock.now
        let now = environment.now()
        var load = LoadPass(environment: environment, now: now,
                            // Only a store this host alone writes holds marks this host left.
                            marksAreOurs: store.sharedLease == nil)
        let expected = try await store.count()
        registry.reserveCapacity(expected)
        load.firstDates.reserveCapacity(expected)
        // In the store's fastest order, the next page read while this one becomes sessions.
        try await store.forEachAccountAsStored(pageSize: 10_000) { record in load.add(record, registry: registry) }
        let read = clock.now
        await scheduler.takeIn(firstDates: load.firstDates)
        load.firstDates = []
        // Rows that hold one verified handle: the newer account names it, whatever order the rows came in.
        for claim in load.handleClaims { await registry.keepNewerHandle(claim.handle, displaced: claim.displaced) }
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
            environment.oauth.importNonces(try await store.allDPoPNonces(), didOf: load.didOfOAuthAccount)
        }
        if load.altered > 0 {
            // No start seals a row (docs/SECURITY.md): a store from before seals, or rows
            // rewritten without the key, wait for the operator.
            logger.error("accounts whose record was changed outside blueskyd, or never sealed, send no token anywhere", metadata: [
                "count": "\(load.altered)", "outcome": "record-altered",
                "next": "blueskyd store reseal --dry-run lists them; a new login mends each",
            ])
        }
        let (count, interrupted) = (load.count, load.interrupted.count)
        load = LoadPass(environment: environment, now: now, marksAreOurs: false)
        // Loading decoded every row through short-lived allocations; hand the freed pages back
        // so that an idle daemon's resident memory is what it keeps, not what it passed through.
        await store.releaseMemory()
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
    let marksAreOurs: Bool
    var count = 0
    /// Rows whose seal did not hold.
    var altered = 0
    var interrupted: [AccountRecord] = []
    var endingSoon: [AccountSession] = []
    var didOfOAuthAccount: [UUID: String] = [:]
    /// Each session's first date, for the scheduler to take in at once after the load.
    var firstDates: [RefreshScheduler.FirstDate] = []
    /// Sessions whose handle a later row claimed too (rare), to settle after the load.
    var handleClaims: [(displaced: AccountSession, handle: String)] = []
    private var interner = StringInterner()

    init(environment: SessionEnvironment, now: Date, marksAreOurs: Bool) {
        self.environment = environment
        self.now = now
        self.marksAreOurs = marksAreOurs
    }

    mutating func add(_ loaded: AccountRecord, registry: AccountRegistry) {
        let record = interner.intern(loaded)
        // With a shared store a mark may be another live host's refresh: the claim tells them apart.
        let interruptedHere = marksAreOurs && record.refreshStartedAt != nil && record.state != .needsLogin
        var due: AccountLifecycle.Due?
        let session = AccountSession(loading: record, environment: environment,
                                     identityCheckedAt: AccountManager.seededIdentityCheck(now: now),
                                     interrupted: interruptedHere, firstDue: &due)
        if let due { firstDates.append((record.id, DueInbox.Noted(due: due, server: record.refreshServer))) }
        if let claim = registry.insert(session, record: record) { handleClaims.append(claim) }
        count += 1
        if record.isAltered { altered += 1 }
        if interruptedHere { interrupted.append(record) }
        if record.authKind == .oauth { didOfOAuthAccount[record.id] = record.did }
        if record.state != .needsLogin, record.sessionEndsSoon(now: now) { endingSoon.append(session) }
    }
}
