import Synchronization

/// The first of several operations to end, without waiting for the others.
///
/// postgres-nio may never resume a LISTEN, or a statement queued behind it, on a connection
/// the server closed (vapor/postgres-nio#601: "listen(_:) leaked its continuation"). A task
/// group waits for all its children, so a deadline raced in one would hang its caller for good
/// (seen here: one `SharedStoreTests` outage run in eight never heard the database come back).
/// Here each operation is a task of its own: the first to end decides, and the others are
/// cancelled and left to end when they can. The caller closes the connection they use, which
/// ends them unless they leaked; a leaked one costs its memory, never the caller.
///
/// Cancelling the caller ends the wait at once with `CancellationError`.
func firstToEnd<T: Sendable>(_ operations: (@Sendable () async throws -> T)...) async throws -> T {
    let race = Race<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            let tasks = operations.map { operation in
                Task {
                    do {
                        race.end(.success(try await operation()))
                    } catch {
                        race.end(.failure(error))
                    }
                }
            }
            race.start(continuation, tasks: tasks)
        }
    } onCancel: {
        race.end(.failure(CancellationError()))
    }
}

/// Runs `operation` within `deadline`; at the deadline `onExpiry` is told (to close what the
/// operation waits on, which should make it end) and the call fails at once, whether or not
/// the operation has ended.
func withDeadline<T: Sendable>(_ deadline: Duration, _ operation: @escaping @Sendable () async throws -> T,
                               onExpiry: @escaping @Sendable (Duration) -> Void) async throws -> T {
    let outcome = try await firstToEnd(
        { DeadlineOutcome.value(try await operation()) },
        {
            try await Task.sleep(for: deadline)
            return DeadlineOutcome<T>.expired
        })
    switch outcome {
    case .value(let value): return value
    case .expired:
        onExpiry(deadline)
        throw PostgresDeadlineExceeded()
    }
}

private enum DeadlineOutcome<T: Sendable>: Sendable {
    case value(T)
    case expired
}

/// The continuation the first result resumes; whatever ends later is dropped.
private final class Race<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var tasks: [Task<Void, Never>] = []
        /// The first result, kept when it came before `start` (an operation that ended at once,
        /// or a caller cancelled before it waited).
        var early: Result<T, any Error>?
        var ended = false
    }

    private let state = Mutex(State())

    func start(_ continuation: CheckedContinuation<T, any Error>, tasks: [Task<Void, Never>]) {
        let early: Result<T, any Error>? = state.withLock { state in
            if state.ended { return state.early }
            state.continuation = continuation
            state.tasks = tasks
            return nil
        }
        if let early {
            tasks.forEach { $0.cancel() }
            continuation.resume(with: early)
        }
    }

    func end(_ result: Result<T, any Error>) {
        let won: (CheckedContinuation<T, any Error>, [Task<Void, Never>])? = state.withLock { state in
            guard !state.ended else { return nil }
            state.ended = true
            guard let continuation = state.continuation else {
                state.early = result
                return nil
            }
            state.continuation = nil
            defer { state.tasks = [] }
            return (continuation, state.tasks)
        }
        guard let (continuation, tasks) = won else { return }
        tasks.forEach { $0.cancel() }
        continuation.resume(with: result)
    }
}
