import Foundation
import RPCServer
import Synchronization

/// The check behind every watchdog keep-alive: the refresh scheduler's loop went round and every
/// event loop serving the socket ran a task, both within the deadline. A daemon whose loops are
/// wedged must stop pinging, so that systemd restarts it.
struct Liveness: Sendable {
    let scheduler: RefreshScheduler
    let server: RPCServer

    /// Names of the parts that did not answer in time; empty when all is well.
    func unresponsiveParts(within deadline: Duration) async -> [String] {
        async let schedulerAlive = Self.answers(within: deadline) { await scheduler.probe() }
        async let socketAlive = Self.answers(within: deadline) { await server.probeLiveness() }
        var parts: [String] = []
        if !(await schedulerAlive) { parts.append("refresh scheduler") }
        if !(await socketAlive) { parts.append("socket event loops") }
        return parts
    }

    /// Runs `probe` in a task of its own and gives up waiting after `deadline`: a probe that never
    /// returns (the very failure looked for) must not hold the watchdog loop too.
    static func answers(within deadline: Duration, _ probe: @escaping @Sendable () async -> Bool) async -> Bool {
        let answer = FirstAnswer()
        return await withCheckedContinuation { continuation in
            answer.wait(with: continuation)
            let timer = Task {
                guard (try? await Task.sleep(for: deadline)) != nil else { return }
                answer.give(false)
            }
            Task {
                answer.give(await probe())
                timer.cancel()
            }
        }
    }
}

/// Resumes one waiter with whichever answer comes first; later answers are dropped.
private final class FirstAnswer: Sendable {
    private let waiter = Mutex<CheckedContinuation<Bool, Never>?>(nil)

    func wait(with continuation: CheckedContinuation<Bool, Never>) {
        waiter.withLock { $0 = continuation }
    }

    func give(_ alive: Bool) {
        waiter.withLock { $0.take() }?.resume(returning: alive)
    }
}
