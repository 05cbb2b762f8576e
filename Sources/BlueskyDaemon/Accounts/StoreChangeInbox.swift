import AccountStoreCore
import Foundation
import Synchronization

/// Other hosts' changes waiting to be read, folded: repeats of one account are one read, and
/// past `limit` accounts one full read of the store replaces them all. What they ask is "read
/// this account again", so the order among them does not matter.
struct PendingStoreChanges: Sendable {
    private var accounts: Set<UUID> = []
    private var everything = false
    let limit: Int

    init(limit: Int) { self.limit = limit }

    var isEmpty: Bool { accounts.isEmpty && !everything }

    mutating func add(_ change: StoreChange) {
        switch change {
        case .account(let id) where !everything:
            accounts.insert(id)
            if accounts.count > limit { (accounts, everything) = ([], true) }
        case .account:
            break
        case .everything:
            (accounts, everything) = ([], true)
        }
    }

    /// What to read now, forgotten here: everything, or the accounts one by one.
    mutating func takeAll() -> [StoreChange] {
        defer { (accounts, everything) = ([], false) }
        return everything ? [.everything] : accounts.map { .account($0) }
    }
}

/// The changes the store's listener hears, on their way to the accounts: a fold
/// (`PendingStoreChanges`), not a queue. Announcements can arrive faster than accounts are read
/// (a burst of another host's refreshes, or someone replaying a signed announcement they
/// overheard, which is valid however often it comes): each costs one id in a bounded set and
/// at most one read at a time, never a queue that grows with the flood.
final class StoreChangeInbox: Sendable {
    private let pending: Mutex<PendingStoreChanges>
    private let wake: AsyncStream<Void>.Continuation
    /// One element per wake-up that found changes waiting (wake-ups fold too).
    let wakes: AsyncStream<Void>

    init(limit: Int = 10_000) {
        pending = Mutex(PendingStoreChanges(limit: limit))
        (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Called on the listener's connection for each change heard: never waits.
    func add(_ change: StoreChange) {
        pending.withLock { $0.add(change) }
        wake.yield()
    }

    func takeAll() -> [StoreChange] { pending.withLock { $0.takeAll() } }
}
