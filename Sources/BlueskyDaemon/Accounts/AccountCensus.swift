import AccountStoreCore
import Foundation
import Synchronization

/// How many accounts are in each state, and when public OAuth sessions end, kept up to date
/// as records change, so that the status line and `daemon.status` never visit every account
/// (at 100,000 accounts, a scan every 30 s is work on a timer for nothing).
final class AccountCensus: Sendable {
    private struct Counts {
        var byState: [AccountState: Int] = [:]
        /// The fixed ends of OAuth sessions of accounts that do not need a login, sorted, and
        /// those added since they were last read, in any order: a start adds one per account,
        /// and inserting each into the sorted array moved half of it every time (at 1,000,000
        /// OAuth accounts, terabytes), where one sort and merge at the next read moves it once.
        var sessionEnds: [Date] = []
        var unmergedEnds: [Date] = []

        /// Brings the ends added since the last read into `sessionEnds`.
        mutating func mergeEnds() {
            guard !unmergedEnds.isEmpty else { return }
            defer { unmergedEnds = [] }
            if unmergedEnds.count == 1 {
                let end = unmergedEnds[0]
                sessionEnds.insert(end, at: AccountCensus.insertionIndex(of: end, in: sessionEnds, after: true))
                return
            }
            unmergedEnds.sort()
            var merged: [Date] = []
            merged.reserveCapacity(sessionEnds.count + unmergedEnds.count)
            var old = sessionEnds.startIndex, new = unmergedEnds.startIndex
            while old < sessionEnds.endIndex, new < unmergedEnds.endIndex {
                if unmergedEnds[new] < sessionEnds[old] {
                    merged.append(unmergedEnds[new])
                    new += 1
                } else {
                    merged.append(sessionEnds[old])
                    old += 1
                }
            }
            merged.append(contentsOf: sessionEnds[old...])
            merged.append(contentsOf: unmergedEnds[new...])
            sessionEnds = merged
        }
        /// Accounts whose row's seal did not hold when last read (`AccountRecord.isAltered`),
        /// by what the store found.
        var altered: [UUID: AccountSealCheck] = [:]
    }

    private let counts = Mutex(Counts())

    func count(_ state: AccountState) -> Int { counts.withLock { $0.byState[state] ?? 0 } }

    /// Sessions whose end is within the warning time (or past) and that still work.
    func sessionsEndingSoon(now: Date) -> Int {
        let horizon = now.addingTimeInterval(AccountRecord.sessionEndWarning)
        return counts.withLock { counts in
            counts.mergeEnds()
            return Self.insertionIndex(of: horizon, in: counts.sessionEnds, after: true)
        }
    }

    /// The accounts whose row's seal did not hold, oldest id first, at most `limit` of them, and
    /// how many there are.
    func altered(limit: Int) -> (count: Int, unsealed: Int, accounts: [(UUID, AccountSealCheck)]) {
        counts.withLock { counts in
            let unsealed = counts.altered.values.count { $0 == .unsealed }
            let some = counts.altered.sorted { $0.key.uuidString < $1.key.uuidString }.prefix(limit).map { ($0.key, $0.value) }
            return (counts.altered.count, unsealed, Array(some))
        }
    }

    func add(_ record: AccountRecord) { change(from: nil, to: record) }

    func remove(_ record: AccountRecord) { change(from: record, to: nil) }

    /// Moves one account from what `old` says to what `new` says (nil: not registered).
    func change(from old: AccountRecord?, to new: AccountRecord?) {
        if old?.isAltered == true || new?.isAltered == true, let id = new?.id ?? old?.id {
            counts.withLock { $0.altered[id] = new.flatMap { $0.isAltered ? $0.alteredCheck : nil } }
        }
        let oldEnd = old.flatMap(Self.trackedEnd), newEnd = new.flatMap(Self.trackedEnd)
        guard old?.state != new?.state || oldEnd != newEnd else { return }
        counts.withLock { counts in
            if let old { counts.byState[old.state, default: 0] -= 1 }
            if let new { counts.byState[new.state, default: 0] += 1 }
            guard oldEnd != newEnd else { return }
            if let oldEnd {
                counts.mergeEnds()
                let index = Self.insertionIndex(of: oldEnd, in: counts.sessionEnds, after: false)
                if index < counts.sessionEnds.count, counts.sessionEnds[index] == oldEnd { counts.sessionEnds.remove(at: index) }
            }
            if let newEnd { counts.unmergedEnds.append(newEnd) }
        }
    }

    private static func trackedEnd(_ record: AccountRecord) -> Date? {
        record.state == .needsLogin ? nil : record.sessionEndsAt
    }

    /// Binary search: the first index whose date is > `date` (`after`) or >= `date`.
    fileprivate static func insertionIndex(of date: Date, in dates: [Date], after: Bool) -> Int {
        var low = 0, high = dates.count
        while low < high {
            let middle = (low + high) / 2
            if dates[middle] < date || (after && dates[middle] == date) { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
