import Foundation

/// A value set once, awaited by anyone (before or after it is set).
package final class CompletionSignal<Value: Sendable>: @unchecked Sendable {
    package init() {}
    private let lock = NSLock()
    private var value: Value?
    private var waiters: [CheckedContinuation<Value, Never>] = []

    /// Sets the value unless it was already set; later calls are ignored.
    package func complete(_ newValue: Value) {
        let waiting: [CheckedContinuation<Value, Never>] = lock.withLock {
            guard value == nil else { return [] }
            value = newValue
            defer { waiters = [] }
            return waiters
        }
        waiting.forEach { $0.resume(returning: newValue) }
    }

    package func completion() async -> Value {
        await withCheckedContinuation { continuation in
            let ready: Value? = lock.withLock {
                if let value { return value }
                waiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
