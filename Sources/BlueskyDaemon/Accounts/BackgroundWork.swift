import Foundation
import Synchronization

/// Work started off a caller's path that touches the store or the network (identity rechecks,
/// profile fetches, nonce saves, a login's last steps): every task is tracked, at most
/// `limit` of a kind run at once, and a stop cancels them all and waits for them, before the
/// store closes.
final class BackgroundWork: Sendable {
    /// What a task does; each kind has its own limit.
    enum Kind: Sendable, Hashable {
        /// An identity recheck (many accounts falling due together do not open as many lookups).
        case identityCheck
        case profileFetch
        case nonceSave
        /// What follows a login's end (closing its callback listener).
        case login

        var limit: Int {
            switch self {
            case .identityCheck, .profileFetch: 4
            // NonceSaver keeps one save under way; a second slot lets the next start while the
            // last is still leaving (it found nothing more to save), so no nonce waits for a
            // later, unrelated save.
            case .nonceSave: 2
            case .login: 64
            }
        }
    }

    private struct State {
        var tasks: [UUID: (kind: Kind, task: Task<Void, Never>)] = [:]
        var stopped = false
    }

    private let state = Mutex(State())

    /// Starts `body` unless `kind`'s limit is reached or the daemon is stopping; false when not
    /// started (the caller tries again later, or does without).
    @discardableResult
    func start(_ kind: Kind, _ body: @escaping @Sendable () async -> Void) -> Bool {
        let id = UUID()
        return state.withLock { state in
            guard !state.stopped, state.tasks.values.count(where: { $0.kind == kind }) < kind.limit else { return false }
            // The task cannot finish before it is registered: `finished` waits for this lock.
            state.tasks[id] = (kind, Task {
                await body()
                self.finished(id)
            })
            return true
        }
    }

    private func finished(_ id: UUID) {
        state.withLock { _ = $0.tasks.removeValue(forKey: id) }
    }

    /// How many tasks run now.
    var running: Int { state.withLock { $0.tasks.count } }

    /// Refuses new work, cancels what runs and waits for it.
    func stop() async {
        let running = state.withLock { state in
            state.stopped = true
            return state.tasks.values.map(\.task)
        }
        for task in running {
            task.cancel()
            await task.value
        }
    }
}
