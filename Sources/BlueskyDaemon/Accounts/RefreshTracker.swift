import Synchronization

/// Counts the refreshes in flight, whoever started them (the schedule, a call meeting an
/// expired token, `accounts.refresh`), so that a stop can wait for all of them before the
/// HTTP clients and the store close: a refresh cut off between the server's rotation and the
/// save loses the account.
final class RefreshTracker: Sendable {
    private struct State {
        var running = 0
        var finished = 0
        var rotated = 0
        var idleWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    var running: Int { state.withLock { $0.running } }
    /// Refreshes that brought new tokens and saved them, since the start (`daemon.status`).
    var rotated: Int { state.withLock { $0.rotated } }

    func countRotation() {
        state.withLock { $0.rotated += 1 }
    }

    func begin() {
        state.withLock { $0.running += 1 }
    }

    func end() {
        let (waiters, trim) = state.withLock { state -> ([CheckedContinuation<Void, Never>], Bool) in
            state.running -= 1
            state.finished += 1
            let trim = state.finished % Self.refreshesBetweenTrims == 0
            guard state.running == 0 else { return ([], trim) }
            defer { state.idleWaiters = [] }
            return (state.idleWaiters, trim)
        }
        waiters.forEach { $0.resume() }
        // Each refresh frees what it replaced (tokens, a record's copy) between what it keeps;
        // now and then, hand the freed pages back so that a daemon that refreshed 100,000
        // accounts does not keep the pages they passed through.
        if trim { ReleaseFreedMemory.now() }
    }

    static let refreshesBetweenTrims = 4096

    /// Returns once no refresh is in flight.
    func waitUntilIdle() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let idle = state.withLock { state -> Bool in
                if state.running == 0 { return true }
                state.idleWaiters.append(continuation)
                return false
            }
            if idle { continuation.resume() }
        }
    }
}
