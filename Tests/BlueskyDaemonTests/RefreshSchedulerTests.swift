import Foundation
import Synchronization
import Testing
@testable import BlueskyDaemon

@Suite("The refresh schedule")
struct RefreshSchedulerTests {
    /// Records what the scheduler ran, and how many ran at once.
    final class Recorder: Sendable {
        private let state = Mutex((order: [UUID](), running: 0, mostAtOnce: 0, runningByHost: [String: Int](),
                                   mostByHost: [String: Int]()))
        /// The server of each account, for the per-server cap.
        let hostOf: [UUID: String]
        var order: [UUID] { state.withLock { $0.order } }
        var mostAtOnce: Int { state.withLock { $0.mostAtOnce } }
        var mostByHost: [String: Int] { state.withLock { $0.mostByHost } }

        init(hostOf: [UUID: String] = [:]) { self.hostOf = hostOf }

        func refresh(_ id: UUID) async {
            let host = hostOf[id] ?? "-"
            state.withLock {
                $0.running += 1; $0.mostAtOnce = max($0.mostAtOnce, $0.running)
                $0.runningByHost[host, default: 0] += 1
                $0.mostByHost[host] = max($0.mostByHost[host] ?? 0, $0.runningByHost[host]!)
            }
            try? await Task.sleep(for: .milliseconds(20))
            state.withLock { $0.order.append(id); $0.running -= 1; $0.runningByHost[host]! -= 1 }
        }

        func waitFor(count: Int) async {
            // Only a bound for a failing run: a loaded machine may take its time.
            let deadline = ContinuousClock.now + .seconds(60)
            while order.count < count, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
        }
    }

    @Test("accounts are refreshed in due order; a reschedule replaces the old entry; nil removes it")
    func dueOrder() async {
        let scheduler = RefreshScheduler(limits: RefreshLimits(overall: 1, perServer: 1), now: { Date() })
        let recorder = Recorder()
        let (a, b, c, moved, removed) = (UUID(), UUID(), UUID(), UUID(), UUID())
        let now = Date()
        await scheduler.schedule(a, at: now.addingTimeInterval(0.30))
        await scheduler.schedule(b, at: now.addingTimeInterval(0.10))
        await scheduler.schedule(c, at: now.addingTimeInterval(0.20))
        await scheduler.schedule(moved, at: now.addingTimeInterval(0.05))
        await scheduler.schedule(moved, at: now.addingTimeInterval(0.40))
        await scheduler.schedule(removed, at: now.addingTimeInterval(0.15))
        await scheduler.schedule(removed, at: Date?.none)
        let running = Task { await scheduler.run { id, _ in await recorder.refresh(id) } }
        await recorder.waitFor(count: 4)
        running.cancel()
        await running.value
        #expect(recorder.order == [b, c, a, moved])
        #expect(await scheduler.nextDue() == nil, "nothing is left: no upkeep asked for another date")
    }

    @Test("a start's first dates, taken in at once, run in due order; a date noted after them wins; an account without one never runs")
    func firstDatesAtOnce() async {
        let scheduler = RefreshScheduler(limits: RefreshLimits(overall: 1, perServer: 1), now: { Date() })
        let recorder = Recorder()
        let now = Date()
        func due(_ seconds: Double?) -> AccountLifecycle.Due {
            AccountLifecycle.Due(date: seconds.map(now.addingTimeInterval), isLocal: false, decidedHere: false, version: 1)
        }
        // Forty dates in no order (a heap built in one pass must still give them in order), one
        // account that waits for a login (no date), and one whose date a session notes after.
        let ids = (0..<40).map { _ in UUID() }
        let offsets = ids.indices.map { Double(($0 * 17) % 40) * 0.005 }
        let (never, renoted) = (UUID(), UUID())
        var firstDates = zip(ids, offsets).map { (id: $0, noted: DueInbox.Noted(due: due($1), server: "https://pds.example")) }
        firstDates.append((never, DueInbox.Noted(due: due(nil), server: "https://pds.example")))
        firstDates.append((renoted, DueInbox.Noted(due: due(0), server: "https://pds.example")))
        await scheduler.takeIn(firstDates: firstDates)
        scheduler.note(renoted, due(0.5), server: "https://pds.example")
        await scheduler.takeInNotedDates()
        let running = Task { await scheduler.run { id, _ in await recorder.refresh(id) } }
        await recorder.waitFor(count: 41)
        running.cancel()
        await running.value
        let expected = zip(ids, offsets).sorted { $0.1 < $1.1 }.map(\.0) + [renoted]
        #expect(recorder.order == expected, "in due order, the later date of the renoted account last")
        #expect(!recorder.order.contains(never))
    }

    @Test("no more than maxConcurrent refreshes run at once, and all of them run")
    func concurrencyLimit() async {
        let scheduler = RefreshScheduler(limits: RefreshLimits(overall: 3, perServer: 3), now: { Date() })
        let recorder = Recorder()
        for _ in 0..<20 { await scheduler.schedule(UUID(), at: Date()) }
        let running = Task { await scheduler.run { id, _ in await recorder.refresh(id) } }
        await recorder.waitFor(count: 20)
        running.cancel()
        await running.value
        #expect(recorder.order.count == 20)
        #expect(recorder.mostAtOnce <= 3)
        #expect(recorder.mostAtOnce > 1, "refreshes of different accounts do run in parallel")
    }

    @Test("a slow server holds at most its per-host share; the others' accounts keep the rest of the slots")
    func perHostLimit() async {
        let scheduler = RefreshScheduler(limits: RefreshLimits(overall: 6, perServer: 2), now: { Date() })
        var hostOf: [UUID: String] = [:]
        for index in 0..<30 { hostOf[UUID()] = index % 3 == 0 ? "https://slow.example" : "https://pds\(index % 3).example" }
        let recorder = Recorder(hostOf: hostOf)
        for (id, host) in hostOf { await scheduler.schedule(id, at: Date(), server: host) }
        let running = Task { await scheduler.run { id, _ in await recorder.refresh(id) } }
        await recorder.waitFor(count: 30)
        running.cancel()
        await running.value
        #expect(recorder.order.count == 30)
        #expect(recorder.mostByHost.values.allSatisfy { $0 <= 2 }, "\(recorder.mostByHost)")
        #expect(recorder.mostAtOnce > 2, "other servers' refreshes run beside a busy one")
        #expect(recorder.mostAtOnce <= 6)
    }

    @Test("after downtime the most overdue accounts go first, whatever order they were scheduled in")
    func mostUrgentFirst() async {
        let scheduler = RefreshScheduler(limits: RefreshLimits(overall: 1, perServer: 1), now: { Date() })
        let recorder = Recorder()
        let now = Date()
        let ids = (0..<8).map { _ in UUID() }
        // Scheduled newest-overdue first; due dates from 8 to 1 minutes ago.
        for (index, id) in ids.enumerated() { await scheduler.schedule(id, at: now.addingTimeInterval(Double(index - 8) * 60)) }
        let running = Task { await scheduler.run { id, _ in await recorder.refresh(id) } }
        await recorder.waitFor(count: 8)
        running.cancel()
        await running.value
        #expect(recorder.order == ids)
    }

    @Test("a refresh that keeps answering a past date is not run again within a second of its end: no spin")
    func noSpin() async {
        let scheduler = RefreshScheduler(limits: .default, now: { Date() })
        let id = UUID()
        let runs = Mutex<[(start: ContinuousClock.Instant, end: ContinuousClock.Instant)]>([])
        await scheduler.schedule(id, at: Date())
        let running = Task {
            await scheduler.run { id, _ in
                let start = ContinuousClock.now
                runs.withLock { $0.append((start, .now)) }
                // An upkeep that ends asking for a date long past.
                scheduler.note(id, AccountLifecycle.Due(date: .distantPast, isLocal: false, decidedHere: true, version: 1),
                               server: "https://pds.test")
            }
        }
        let deadline = ContinuousClock.now + .seconds(30)
        while runs.withLock({ $0.count }) < 3, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        running.cancel()
        await running.value
        let times = runs.withLock { $0 }
        #expect(times.count >= 3)
        for (earlier, later) in zip(times, times.dropFirst()) {
            // The scheduler notes the end a moment after the action returns; allow for that.
            #expect(later.start - earlier.end >= .milliseconds(950), "run again \(later.start - earlier.end) after the last one ended")
        }
    }
}
