import Foundation

/// Runs blocking work (socket reads, process waits) on a thread of its own.
///
/// Swift concurrency has one thread per core here; a test that blocks one while the in-process
/// testbed needs it to answer the daemon would deadlock. Anything that may block goes here.
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            continuation.resume(with: Result { try body() })
        }
        thread.start()
    }
}
