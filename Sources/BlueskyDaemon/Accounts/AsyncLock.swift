import DequeModule
import Synchronization

/// A lock that suspends instead of blocking, held across awaits (an actor would let another
/// call in at every await). Waiters get it in arrival order.
final class AsyncLock: Sendable {
    private struct State {
        var held = false
        var waiters = Deque<CheckedContinuation<Void, Never>>()
    }

    private let state = Mutex(State())

    func lock() async {
        await withCheckedContinuation { continuation in
            let acquired = state.withLock { state in
                guard state.held else {
                    state.held = true
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if acquired { continuation.resume() }
        }
    }

    /// Hands the lock to the next waiter, if any.
    func unlock() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let next = state.waiters.popFirst() else {
                state.held = false
                return nil
            }
            return next
        }
        next?.resume()
    }
}
