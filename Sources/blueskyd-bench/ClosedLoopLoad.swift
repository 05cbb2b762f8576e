import NIOCore
import Synchronization

/// Counters shared by the loops of one measurement.
final class LoadCounters: Sendable {
    let succeeded = Atomic<Int>(0)
    let failed = Atomic<Int>(0)
    let running = Atomic<Bool>(true)
    /// The first error that stopped a loop, for the report.
    let firstError = Mutex<String?>(nil)

    /// Counts one call's outcome; false when the loop must stop (a broken connection would
    /// otherwise spin: that loop stops, the others go on).
    func record(_ result: Result<Bool, any Error>) -> Bool {
        switch result {
        case .success(true):
            succeeded.add(1, ordering: .relaxed)
            return true
        case .success(false):
            failed.add(1, ordering: .relaxed)
            firstError.withLock { $0 = $0 ?? "a call did not return status 200" }
            return true
        case .failure(let error):
            failed.add(1, ordering: .relaxed)
            firstError.withLock { $0 = $0 ?? describe(error) }
            return false
        }
    }
}

/// Closed-loop load: one loop per endpoint, each issuing its next call as soon as the previous
/// one completes, so the number of calls in flight is exactly the number of loops.
/// Everything runs in completion callbacks on the event loops: no task hops per call.
enum ClosedLoopLoad {
    struct Measurement: Sendable {
        /// Successful calls per second over the measured window.
        var callsPerSecond: Double
        var succeeded: Int
        /// Calls that failed or got a status other than 200 (warm-up and ramp included).
        var failed: Int
        var firstError: String?
    }

    /// Runs the loops for `rampSeconds` (not counted), then counts successes for `seconds`.
    static func measure(endpoints: [any BenchEndpoint], seconds: Double, rampSeconds: Double,
                        loop: any EventLoop) async -> Measurement {
        let counters = LoadCounters()
        let finished = endpoints.map { endpoint in
            let done = loop.makePromise(of: Void.self)
            run(endpoint, counters, done)
            return done.futureResult
        }
        try? await Task.sleep(for: .seconds(rampSeconds))
        let startCount = counters.succeeded.load(ordering: .relaxed)
        let start = ContinuousClock.now
        try? await Task.sleep(for: .seconds(seconds))
        let endCount = counters.succeeded.load(ordering: .relaxed)
        let elapsed = ContinuousClock.now - start
        counters.running.store(false, ordering: .relaxed)
        // Lets the calls in flight finish so the next round starts from idle connections.
        _ = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                (try? await EventLoopFuture.andAllComplete(finished, on: loop).get()) != nil
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(15))
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        let seconds = elapsed.inSeconds
        return Measurement(
            callsPerSecond: Double(endCount - startCount) / seconds, succeeded: endCount - startCount,
            failed: counters.failed.load(ordering: .relaxed),
            firstError: counters.firstError.withLock { $0 })
    }

    private static func run(_ endpoint: any BenchEndpoint, _ counters: LoadCounters, _ done: EventLoopPromise<Void>) {
        endpoint.callOnce().whenComplete { result in
            guard counters.record(result) else { return done.succeed() }
            if counters.running.load(ordering: .relaxed) {
                run(endpoint, counters, done)
            } else {
                done.succeed()
            }
        }
    }
}
