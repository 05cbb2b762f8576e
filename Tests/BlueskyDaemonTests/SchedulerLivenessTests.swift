import Foundation
import Testing
@testable import BlueskyDaemon

@Suite("The scheduler's liveness probe and run-time limits")
struct SchedulerLivenessTests {
    @Test("a probe is answered by the running loop, even when nothing is due for an hour; not when it is stopped")
    func probe() async {
        let scheduler = RefreshScheduler(limits: RefreshLimits(overall: 1, perServer: 1), now: { Date() })
        #expect(await scheduler.probe() == false, "no loop, no proof of life")
        await scheduler.schedule(UUID(), at: Date().addingTimeInterval(3600))
        let running = Task { await scheduler.run { _, _ in } }
        let deadline = ContinuousClock.now + .seconds(60)
        var alive = false
        while !alive, ContinuousClock.now < deadline {
            alive = await Liveness.answers(within: .seconds(1)) { await scheduler.probe() }
        }
        #expect(alive, "the sleeping loop wakes, goes round and answers")
        running.cancel()
        await running.value
        #expect(await scheduler.probe() == false)
    }

    // What matters is that the check returns at all (a hung check would hang the watchdog);
    // how fast depends on the machine's load, so the time limit only stops a hang.
    @Test("a probe that never answers counts as dead after the deadline", .timeLimit(.minutes(1)))
    func hungProbe() async {
        let alive = await Liveness.answers(within: .milliseconds(200)) {
            await withCheckedContinuation { (_: CheckedContinuation<Void, Never>) in }  // never resumes
            return true
        }
        #expect(!alive)
    }

    @Test("raising max_concurrent_refreshes while running lets more refreshes run at once")
    func raiseLimit() async {
        let scheduler = RefreshScheduler(limits: RefreshLimits(overall: 1, perServer: 1), now: { Date() })
        let recorder = RefreshSchedulerTests.Recorder()
        for _ in 0..<40 { await scheduler.schedule(UUID(), at: Date()) }
        await scheduler.setLimits(RefreshLimits(overall: 4, perServer: 4))
        let running = Task { await scheduler.run { id, _ in await recorder.refresh(id) } }
        await recorder.waitFor(count: 40)
        running.cancel()
        await running.value
        #expect(recorder.order.count == 40)
        #expect(recorder.mostAtOnce > 1 && recorder.mostAtOnce <= 4, "saw \(recorder.mostAtOnce) at once")
    }
}

@Suite("The watchdog's liveness check")
struct LivenessCheckTests {
    @Test("parts that answer false or not at all are named; the check itself returns", .timeLimit(.minutes(1)))
    func namesTheDeadParts() async {
        let liveness = Liveness(probes: [
            .init(name: "alive") { true },
            .init(name: "says no") { false },
            .init(name: "wedged") {
                await withCheckedContinuation { (_: CheckedContinuation<Void, Never>) in }
                return true
            },
        ])
        #expect(await liveness.unresponsiveParts(within: .milliseconds(200)) == ["says no", "wedged"])
        #expect(await Liveness(probes: [.init(name: "alive") { true }]).unresponsiveParts(within: .seconds(1)).isEmpty)
    }
}
