import Foundation
import Synchronization

/// Work started off a caller's path (the periodic identity rechecks): at most `limit` at a
/// time, so that many accounts coming due together do not open as many lookups at once, and
/// cancelled and awaited at stop, before the store closes.
final class BackgroundChecks: Sendable {
    let limit: Int
    private struct State {
        var tasks: [UUID: Task<Void, Never>] = [:]
        var stopped = false
    }
    private let state = Mutex(State())

    init(limit: Int) {
        self.limit = limit
    }

    /// Starts `body` unless `limit` are running or the daemon is stopping; false when not
    /// started (the caller tries again later).
    @discardableResult
    func start(_ body: @escaping @Sendable () async -> Void) -> Bool {
        let id = UUID()
        return state.withLock { state in
            guard !state.stopped, state.tasks.count < limit else { return false }
            // The task cannot finish before it is registered: `finished` waits for this lock.
            state.tasks[id] = Task {
                await body()
                self.finished(id)
            }
            return true
        }
    }

    private func finished(_ id: UUID) {
        state.withLock { _ = $0.tasks.removeValue(forKey: id) }
    }

    /// Refuses new work, cancels what runs and waits for it.
    func stop() async {
        let running = state.withLock { state in
            state.stopped = true
            return Array(state.tasks.values)
        }
        for task in running {
            task.cancel()
            await task.value
        }
    }
}
