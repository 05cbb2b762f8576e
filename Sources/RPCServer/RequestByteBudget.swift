import Synchronization

/// The bytes of request lines held at once across every connection. A line is counted from the
/// moment it is read until its reply is written; past `capacity`, connections stop reading (the
/// kernel then stops their clients) until replies free enough. Without it, many connections each
/// sending many maximum-size lines could make the daemon hold gigabytes.
final class RequestByteBudget: Sendable {
    let capacity: Int

    private struct Waiter {
        let id: UInt64
        let bytes: Int
        let continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var inUse = 0
        /// First come, first served: a large line waiting is not overtaken by small ones.
        var waiters: [Waiter] = []
        var nextID: UInt64 = 0

        /// Takes the waiters that now fit, in order.
        mutating func admitWaiters() -> [Waiter] {
            var admitted: [Waiter] = []
            while let first = waiters.first, inUse + first.bytes <= capacity {
                inUse += first.bytes
                admitted.append(waiters.removeFirst())
            }
            return admitted
        }

        let capacity: Int
    }

    private let state: Mutex<State>

    init(capacity: Int) {
        precondition(capacity > 0)
        self.capacity = capacity
        state = Mutex(State(capacity: capacity))
    }

    /// Bytes held now, and the readers waiting for room.
    var usage: (inUse: Int, waiting: Int) { state.withLock { ($0.inUse, $0.waiters.count) } }

    /// Waits until `bytes` (at most the capacity) fit. False when the task is cancelled while
    /// waiting: then nothing was taken.
    func acquire(_ bytes: Int) async -> Bool {
        let bytes = min(max(bytes, 0), capacity)
        let id: UInt64? = state.withLock { state in
            if state.waiters.isEmpty, state.inUse + bytes <= capacity {
                state.inUse += bytes
                return nil
            }
            state.nextID += 1
            return state.nextID
        }
        guard let id else { return true }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let immediate: Bool? = state.withLock { state in
                    // Cancelled before waiting: the handler below found nothing to resume.
                    if Task.isCancelled { return false }
                    if state.waiters.isEmpty, state.inUse + bytes <= capacity {
                        state.inUse += bytes
                        return true
                    }
                    state.waiters.append(Waiter(id: id, bytes: bytes, continuation: continuation))
                    return nil
                }
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            let (cancelled, admitted) = state.withLock { state -> (Waiter?, [Waiter]) in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return (nil, []) }
                let waiter = state.waiters.remove(at: index)
                // Those behind it may fit now.
                return (waiter, state.admitWaiters())
            }
            cancelled?.continuation.resume(returning: false)
            for waiter in admitted { waiter.continuation.resume(returning: true) }
        }
    }

    /// Gives back what `acquire(bytes)` took, admitting waiters that now fit.
    func release(_ bytes: Int) {
        let bytes = min(max(bytes, 0), capacity)
        let admitted = state.withLock { state -> [Waiter] in
            state.inUse -= bytes
            return state.admitWaiters()
        }
        for waiter in admitted { waiter.continuation.resume(returning: true) }
    }
}
