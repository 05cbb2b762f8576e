import AccountStoreCore
import Foundation
import Logging
import WebBasics

/// Takes due accounts from the shared schedule for this host, as many as it has free refresh
/// slots, and hands them to the local scheduler, which runs them under its limits. Hosts that
/// take at the same moment skip each other's rows (`FOR UPDATE SKIP LOCKED`), so the work
/// spreads over the hosts by itself, and a host that stops taking leaves its share to the rest.
/// Accounts of servers whose slots are all in use here are left to the other hosts.
struct SharedScheduleTaker {
    let schedule: any SharedRefreshSchedule
    let scheduler: RefreshScheduler
    /// Hands the accounts as taken (rows and secrets) to their sessions, before the scheduler
    /// runs them: their upkeep then needs no read of its own.
    let adopt: @Sendable ([TakenAccount]) async -> Void
    let logger: Logger
    let now: @Sendable () -> Date
    /// How long the taker sleeps at most: dates other hosts record are seen this late.
    var longestSleep: TimeInterval = 2
    /// A pause after a full take, while the local scheduler starts what it was given.
    var pauseWhenFull: TimeInterval = 0.05

    func run() async {
        var failures = 0
        while !Task.isCancelled {
            let sleep: TimeInterval
            do {
                sleep = try await takeOnce()
                if failures > 0 { logger.info("taking from the shared schedule again") }
                failures = 0
            } catch {
                failures += 1
                if failures == 1 {
                    logger.warning("cannot take due accounts from the shared schedule; trying again with backoff",
                                   metadata: ["error": "\(error)"])
                }
                sleep = Backoff.storeRetry.delay(attempt: failures)
            }
            try? await Task.sleep(for: .seconds(sleep))
        }
    }

    /// Takes what is due and fits; returns how long to sleep before looking again.
    private func takeOnce() async throws(StoreError) -> TimeInterval {
        let (room, skipping) = await scheduler.takeBudget()
        guard room > 0 else { return pauseWhenFull }
        let taken = try await schedule.takeDueRefreshes(limit: room, at: now(), skipping: skipping)
        await adopt(taken)
        await scheduler.dispatchTaken(taken.map(\.record.id))
        if taken.count == room { return pauseWhenFull }
        let next = try await schedule.nextRefreshDue()
        await scheduler.setSharedNextDue(next)
        guard let next else { return longestSleep }
        return min(max(next.timeIntervalSince(now()), pauseWhenFull), longestSleep)
    }
}
