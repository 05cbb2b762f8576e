import Foundation
import RPCServer
import Synchronization

/// The check behind every watchdog keep-alive: the refresh scheduler's loop went round and every
/// event loop serving the socket ran a task, both within the deadline. A daemon whose loops are
/// wedged must stop pinging, so that systemd restarts it.
struct Liveness: Sendable {
    /// One part of the daemon and how to ask it whether it is alive.
    struct Probe: Sendable {
        var name: String
        var answers: @Sendable () async -> Bool
    }

    let probes: [Probe]

    /// The daemon's parts: the scheduler loop and the socket's event loops.
    init(scheduler: RefreshScheduler, server: RPCServer) {
        probes = [
            Probe(name: "refresh scheduler") { await scheduler.probe() },
            Probe(name: "socket event loops") { await server.probeLiveness() },
        ]
    }

    init(probes: [Probe]) {
        self.probes = probes
    }

    /// Names of the parts that did not answer in time (probed concurrently); empty when all is well.
    func unresponsiveParts(within deadline: Duration) async -> [String] {
        await withTaskGroup(of: (Int, Bool).self) { group in
            for (index, probe) in probes.enumerated() {
                group.addTask { (index, await Self.answers(within: deadline, probe.answers)) }
            }
            var dead: [Int] = []
            for await (index, alive) in group where !alive { dead.append(index) }
            return dead.sorted().map { probes[$0].name }
        }
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
