import Synchronization

/// Counts the refreshes in flight, whoever started them (the schedule, a call meeting an
/// expired token, `accounts.refresh`), so that a stop can wait for all of them before the
/// HTTP clients and the store close: a refresh cut off between the server's rotation and the
/// save loses the account.
final class RefreshTracker: Sendable {
    private struct State {
        var running = 0
        var idleWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    var running: Int { state.withLock { $0.running } }

    func begin() {
        state.withLock { $0.running += 1 }
    }

    func end() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.running -= 1
            guard state.running == 0 else { return [] }
            defer { state.idleWaiters = [] }
            return state.idleWaiters
        }
        waiters.forEach { $0.resume() }
    }

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
