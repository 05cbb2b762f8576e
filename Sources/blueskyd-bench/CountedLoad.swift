import NIOCore
import Synchronization

/// Closed-loop load of a fixed number of calls: like `ClosedLoopLoad`, one loop per endpoint
/// with one call in flight each, but the loops share a budget of calls instead of a duration,
/// so exactly `total` calls are made.
enum CountedLoad {
    struct Measurement: Sendable {
        /// From the first call sent to the last reply.
        var wallSeconds: Double
        var succeeded: Int
        var failed: Int
        var firstError: String?
    }

    private final class Budget: Sendable {
        let remaining: Atomic<Int>
        let counters = LoadCounters()
        init(_ total: Int) { remaining = Atomic(total) }

        /// Takes one call from the budget; false once it is spent.
        func claim() -> Bool { remaining.subtract(1, ordering: .relaxed).newValue >= 0 }
    }

    static func run(endpoints: [any BenchEndpoint], total: Int, loop: any EventLoop) async -> Measurement {
        let budget = Budget(total)
        let start = ContinuousClock.now
        let finished = endpoints.map { endpoint in
            let done = loop.makePromise(of: Void.self)
            next(endpoint, budget, done)
            return done.futureResult
        }
        _ = try? await EventLoopFuture.andAllComplete(finished, on: loop).get()
        let elapsed = ContinuousClock.now - start
        return Measurement(
            wallSeconds: elapsed.inSeconds, succeeded: budget.counters.succeeded.load(ordering: .relaxed),
            failed: budget.counters.failed.load(ordering: .relaxed),
            firstError: budget.counters.firstError.withLock { $0 })
    }

    private static func next(_ endpoint: any BenchEndpoint, _ budget: Budget, _ done: EventLoopPromise<Void>) {
        guard budget.claim() else {
            done.succeed()
            return
        }
        endpoint.callOnce().whenComplete { result in
            guard budget.counters.record(result) else { return done.succeed() }
            next(endpoint, budget, done)
        }
    }
}
