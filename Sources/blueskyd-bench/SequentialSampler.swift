import NIOCore
import Synchronization

/// Times calls made strictly one after another (one in flight), chained on the event loop.
enum SequentialSampler {
    struct Samples: Sendable {
        /// Each call's duration in microseconds, from just before the request is written to the
        /// completion of its reply.
        var microseconds: [Double] = []
        var failures = 0
    }

    private final class Recorder: Sendable {
        let samples = Mutex(Samples())
    }

    static func sample(_ endpoint: any BenchEndpoint, count: Int, loop: any EventLoop) async throws -> Samples {
        let recorder = Recorder()
        recorder.samples.withLock { $0.microseconds.reserveCapacity(count) }
        let done = loop.makePromise(of: Void.self)
        loop.execute { step(endpoint, remaining: count, recorder, done) }
        try await done.futureResult.get()
        return recorder.samples.withLock { $0 }
    }

    private static func step(_ endpoint: any BenchEndpoint, remaining: Int, _ recorder: Recorder,
                             _ done: EventLoopPromise<Void>) {
        let start = NIODeadline.now()
        endpoint.callOnce().whenComplete { result in
            let elapsed = NIODeadline.now() - start
            switch result {
            case .failure(let error):
                done.fail(error)
                return
            case .success(let ok):
                recorder.samples.withLock { samples in
                    samples.microseconds.append(Double(elapsed.nanoseconds) / 1000)
                    if !ok { samples.failures += 1 }
                }
            }
            if remaining > 1 {
                step(endpoint, remaining: remaining - 1, recorder, done)
            } else {
                done.succeed()
            }
        }
    }
}
