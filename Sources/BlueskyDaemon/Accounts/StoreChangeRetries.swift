import AccountStoreCore
import Foundation
import WebBasics

/// Other hosts' changes this host could not read yet, tried again with backoff until they go
/// through. Repeats of one account fold into one; past `limit` accounts, one full read of the
/// store replaces them all.
actor StoreChangeRetries {
    private var pending: Set<UUID> = []
    private var everything = false
    private let limit: Int
    private let wakes: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation

    init(limit: Int = 10_000) {
        self.limit = limit
        (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    var isEmpty: Bool { pending.isEmpty && !everything }

    func add(_ change: StoreChange) {
        switch change {
        case .account(let id) where !everything:
            pending.insert(id)
            if pending.count > limit { (pending, everything) = ([], true) }
        case .account:
            break
        case .everything:
            (pending, everything) = ([], true)
        }
        wake.yield()
    }

    /// What to try now, and forgets it: everything, or the accounts one by one.
    func takeAll() -> [StoreChange] {
        defer { (pending, everything) = ([], false) }
        return everything ? [.everything] : pending.map { .account($0) }
    }

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
