import AccountStoreCore
import Foundation
import Logging
import Synchronization
import BlueskyTesting
import Testing
@testable import BlueskyDaemon

/// The shared schedule as the daemon drives it: takers on several hosts, the local
/// schedulers' limits, the dates written back. The store is an in-memory stand-in with the
/// same contract as PostgreSQL's (SharedScheduleTests in BlueskyStoreTests checks that one).
@Suite("Hosts taking due accounts from a shared schedule")
struct SharedScheduleTakerTests {
    final class MemorySchedule: SharedRefreshSchedule {
        struct State {
            var due: [UUID: Date] = [:]
            var failTakes = 0
            var failedTakes = 0
            var failWrites = 0
            var failedWrites = 0
        }
        let state = Mutex(State())
        let lease: TimeInterval = 60

        func setRefreshDue(_ dates: [ScheduledDate]) throws(StoreError) {
            try state.withLock { state throws(StoreError) in
                if state.failWrites > 0 {
                    state.failWrites -= 1
                    state.failedWrites += 1
                    throw StoreError.database(context: "recording due dates", reason: "database or disk is full")
                }
                for date in dates { state.due[date.id] = date.due }
            }
        }

        func setDue(_ ids: [UUID], at date: Date) {
            state.withLock { state in for id in ids { state.due[id] = date } }
        }

        func takeDueRefreshes(limit: Int, at now: Date, skipping servers: Set<String>) throws(StoreError) -> [TakenAccount] {
            try state.withLock { state throws(StoreError) in
                if state.failTakes > 0 {
                    state.failTakes -= 1
                    state.failedTakes += 1
                    throw StoreError.unreachable(location: "memory", reason: "connection refused")
                }
                let taken = state.due.filter { $0.value <= now }.sorted { $0.value < $1.value }.prefix(limit).map(\.key)
                for id in taken { state.due[id] = now.addingTimeInterval(lease) }
                return taken.map {
                    TakenAccount(record: AccountRecord(id: $0, did: "did:plc:\($0.uuidString.prefix(8).lowercased())", pds: "https://pds.test",
                                                       authKind: .appPassword), secrets: nil)
                }
            }
        }

        func nextRefreshDue() throws(StoreError) -> Date? { state.withLock { $0.due.values.min() } }

        func repairMissingDueDates(at now: Date) throws(StoreError) -> Int { 0 }
    }

    /// The accounts one host refreshed, in order.
    final class Refreshed: Sendable {
        private let ids = Mutex([UUID]())
        var all: [UUID] { ids.withLock { $0 } }
        func append(_ id: UUID) { ids.withLock { $0.append(id) } }
    }

    /// One host: its scheduler, taker and writer; counts what it refreshed.
    struct Host {
        let scheduler: RefreshScheduler
        let dates = SharedDueWriter()
        let refreshed = Refreshed()
        /// The accounts the taker handed to their sessions before running them.
        let adopted = Refreshed()
        let tasks: [Task<Void, Never>]

        /// Starts the host once it knows the accounts (as the daemon loads them before it
        /// takes any): a taken account the host does not know waits out the lease.
        init(schedule: MemorySchedule, accounts: [UUID], next: Date) async {
            let dates = self.dates
            let scheduler = RefreshScheduler(limits: RefreshLimits(overall: 4, perServer: 4), now: { Date() }, shared: dates)
            self.scheduler = scheduler
            for id in accounts { await scheduler.know(id, server: "https://pds.test") }
            let (refreshed, adopted) = (self.refreshed, self.adopted)
            let taker = SharedScheduleTaker(schedule: schedule, scheduler: scheduler,
                                            adopt: { taken in for account in taken { adopted.append(account.record.id) } },
                                            logger: Logger(label: "test"),
                                            now: { Date() }, longestSleep: 0.2, pauseWhenFull: 0.01)
            tasks = [
                Task {
                    await scheduler.run { id, call in
                        try? await Task.sleep(for: .milliseconds(5))
                        // A taken account reaches its upkeep with the row the take read.
                        if call == .taken, !adopted.all.contains(id) { Issue.record("\(id) ran before its session had the taken row") }
                        refreshed.append(id)
                        // What a session's upkeep tells when it ends: its next date, its own decision.
                        scheduler.note(id, AccountLifecycle.Due(date: next, isLocal: false, decidedHere: true, version: 1),
                                       server: "https://pds.test")
                    }
                },
                Task { await taker.run() },
                Task { await dates.run(schedule: schedule, logger: Logger(label: "test")) },
            ]
        }

        func stop() async {
            for task in tasks { task.cancel() }
            dates.stop()
            for task in tasks { await task.value }
        }
    }

    @Test("three hosts take 300 due accounts: each refreshed once, the work spread, the next dates written back")
    func spreads() async throws {
        let schedule = MemorySchedule()
        let accounts = (0..<300).map { _ in UUID() }
        let next = Date().addingTimeInterval(3600)
        schedule.setDue(accounts, at: Date())
        var hosts: [Host] = []
        for _ in 0..<3 { hosts.append(await Host(schedule: schedule, accounts: accounts, next: next)) }
        let done = await eventually(timeout: .seconds(60)) {
            schedule.state.withLock { $0.due.values.allSatisfy { $0 == next } }
        }
        for host in hosts { await host.stop() }
        #expect(done, "every account's next date is in the shared schedule")
        let counts = hosts.map { $0.refreshed.all.count }
        let all = hosts.flatMap { $0.refreshed.all }
        #expect(all.count == 300 && Set(all) == Set(accounts), "each account once: \(counts)")
        #expect(counts.allSatisfy { $0 > 0 }, "every host took a share: \(counts)")
    }

    @Test("a store that refuses takes: the taker backs off, then takes again and the refresh happens once")
    func failingStore() async throws {
        let schedule = MemorySchedule()
        let account = UUID()
        schedule.setDue([account], at: Date())
        schedule.state.withLock { $0.failTakes = 3 }
        let host = await Host(schedule: schedule, accounts: [account], next: Date().addingTimeInterval(600))
        let refreshed = await eventually(timeout: .seconds(60)) { host.refreshed.all.count == 1 }
        let failures = schedule.state.withLock { $0.failedTakes }
        let written = await eventually(timeout: .seconds(60)) {
            schedule.state.withLock { $0.due[account] }.map { $0.timeIntervalSinceNow > 500 } == true
        }
        await host.stop()
        #expect(refreshed && failures == 3)
        #expect(written, "the next date reached the shared schedule")
    }

    @Test("a store that refuses the next dates: they are kept and written once it takes them, nothing refreshed twice")
    func failingWrites() async throws {
        let schedule = MemorySchedule()
        let accounts = (0..<3).map { _ in UUID() }
        schedule.setDue(accounts, at: Date())
        schedule.state.withLock { $0.failWrites = 2 }
        let next = Date().addingTimeInterval(600)
        let host = await Host(schedule: schedule, accounts: accounts, next: next)
        let written = await eventually(timeout: .seconds(60)) {
            schedule.state.withLock { state in accounts.allSatisfy { state.due[$0] == next } }
        }
        let failures = schedule.state.withLock { $0.failedWrites }
        await host.stop()
        #expect(written && failures == 2, "the dates outlived two refused writes")
        #expect(host.refreshed.all.count == 3, "each account refreshed once, not again while its date waited: \(host.refreshed.all)")
    }
}
