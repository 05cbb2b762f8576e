import Foundation
import Synchronization
import Testing
@testable import BlueskyDaemon

@Suite("The refresh schedule")
struct RefreshSchedulerTests {
    /// Records what the scheduler ran, and how many ran at once.
    final class Recorder: Sendable {
        private let state = Mutex((order: [UUID](), running: 0, mostAtOnce: 0))
        var order: [UUID] { state.withLock { $0.order } }
        var mostAtOnce: Int { state.withLock { $0.mostAtOnce } }

        func refresh(_ id: UUID) async -> Date? {
            state.withLock { $0.running += 1; $0.mostAtOnce = max($0.mostAtOnce, $0.running) }
            try? await Task.sleep(for: .milliseconds(20))
            state.withLock { $0.order.append(id); $0.running -= 1 }
            return nil
        }

        func waitFor(count: Int) async {
            // Only a bound for a failing run: a loaded machine may take its time.
            let deadline = ContinuousClock.now + .seconds(60)
            while order.count < count, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
        }
    }

    @Test("accounts are refreshed in due order; a reschedule replaces the old entry; nil removes it")
    func dueOrder() async {
        let scheduler = RefreshScheduler(maxConcurrent: 1, now: { Date() })
        let recorder = Recorder()
        let (a, b, c, moved, removed) = (UUID(), UUID(), UUID(), UUID(), UUID())
        let now = Date()
        await scheduler.schedule(a, at: now.addingTimeInterval(0.30))
        await scheduler.schedule(b, at: now.addingTimeInterval(0.10))
        await scheduler.schedule(c, at: now.addingTimeInterval(0.20))
        await scheduler.schedule(moved, at: now.addingTimeInterval(0.05))
        await scheduler.schedule(moved, at: now.addingTimeInterval(0.40))
        await scheduler.schedule(removed, at: now.addingTimeInterval(0.15))
        await scheduler.schedule(removed, at: nil)
        let running = Task { await scheduler.run { await recorder.refresh($0) } }
        await recorder.waitFor(count: 4)
        running.cancel()
        await running.value
        #expect(recorder.order == [b, c, a, moved])
        #expect(await scheduler.nextDue() == nil, "nothing is left: each action answered nil")
    }

    @Test("no more than maxConcurrent refreshes run at once, and all of them run")
    func concurrencyLimit() async {
        let scheduler = RefreshScheduler(maxConcurrent: 3, now: { Date() })
        let recorder = Recorder()
        for _ in 0..<20 { await scheduler.schedule(UUID(), at: Date()) }
        let running = Task { await scheduler.run { await recorder.refresh($0) } }
        await recorder.waitFor(count: 20)
        running.cancel()
        await running.value
        #expect(recorder.order.count == 20)
        #expect(recorder.mostAtOnce <= 3)
        #expect(recorder.mostAtOnce > 1, "refreshes of different accounts do run in parallel")
    }
}
