import AccountStoreCore
import Foundation
import WebBasics

/// Other hosts' changes this host could not read yet, tried again with backoff until they go
/// through. Repeats of one account fold into one; past `limit` accounts, one full read of the
/// store replaces them all.
actor StoreChangeRetries {
    private var pending: PendingStoreChanges
    private let wakes: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation

    init(limit: Int = 10_000) {
        pending = PendingStoreChanges(limit: limit)
        (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    var isEmpty: Bool { pending.isEmpty }

    func add(_ change: StoreChange) {
        pending.add(change)
        wake.yield()
    }

    /// What to try now, and forgets it: everything, or the accounts one by one.
    func takeAll() -> [StoreChange] { pending.takeAll() }

    /// Until cancelled: waits for changes to retry, waits out the backoff, and hands each to
    /// `apply`; those that fail again come back with a longer wait.
    func run(backoff: Backoff, apply: @Sendable (StoreChange) async -> Bool) async {
        var attempt = 0
        for await _ in wakes {
            while !isEmpty, !Task.isCancelled {
                attempt += 1
                try? await Task.sleep(for: .seconds(backoff.delay(attempt: attempt)))
                guard !Task.isCancelled else { return }
                var failed = false
                for change in takeAll() where !(await apply(change)) {
                    add(change)
                    failed = true
                }
                if !failed { attempt = 0 }
            }
        }
    }
}
