import Foundation
import Synchronization

/// The latest `DPoP-Nonce` of each server, per account.
///
/// Each server (the authorization server and every PDS origin) issues its own nonces, rotating
/// about every minute with previous, current and next accepted. Keeping the latest one, updated
/// from EVERY response (successes included), means a steady stream of calls almost never pays a
/// `use_dpop_nonce` round trip. Not saving the nonce after a successful retry is a common bug.
public final class DPoPNonceCache: Sendable {
    /// One remembered nonce, in the form the daemon persists.
    public struct Entry: Codable, Sendable, Equatable {
        public var account: String
        /// `scheme://host[:port]`, as ``HTTPTargetURI/origin``.
        public var origin: String
        public var nonce: String
        public var receivedAt: Date

        public init(account: String, origin: String, nonce: String, receivedAt: Date) {
            self.account = account
            self.origin = origin
            self.nonce = nonce
            self.receivedAt = receivedAt
        }
    }

    private struct Key: Hashable {
        var account: String
        var origin: String
    }

    private let entries = Mutex<[Key: Entry]>([:])

    public init() {}

    /// The nonce to put in the next proof for `account` to `origin`, if one is known.
    public func nonce(account: String, origin: String) -> String? {
        entries.withLock { $0[Key(account: account, origin: origin)]?.nonce }
    }

    /// Remembers `nonce` (the latest value wins); `nil` or empty leaves the cache as it was, so
    /// it can be fed the `DPoP-Nonce` header of every response without checking it first.
    public func update(account: String, origin: String, nonce: String?, receivedAt: Date = Date()) {
        guard let nonce, !nonce.isEmpty else { return }
        entries.withLock {
            $0[Key(account: account, origin: origin)] =
                Entry(account: account, origin: origin, nonce: nonce, receivedAt: receivedAt)
        }
    }

    /// Drops everything remembered for `account` (logout, removal).
    public func forget(account: String) {
        entries.withLock { $0 = $0.filter { $0.key.account != account } }
    }

    /// Moves `from`'s nonces to `to`, keeping any newer one `to` already has: at login the PAR
    /// and code exchange run before the DID is known (under, say, the handle), and the session
    /// then continues under the DID without paying a fresh challenge.
    public func move(from: String, to: String) {
        entries.withLock { entries in
            for (key, entry) in entries where key.account == from {
                entries[key] = nil
                let target = Key(account: to, origin: key.origin)
                if let current = entries[target], current.receivedAt > entry.receivedAt { continue }
                entries[target] = Entry(account: to, origin: key.origin, nonce: entry.nonce, receivedAt: entry.receivedAt)
            }
        }
    }

    /// Everything remembered, for persisting; sorted so the output is stable.
    public func exported() -> [Entry] {
        entries.withLock { Array($0.values) }.sorted { ($0.account, $0.origin) < ($1.account, $1.origin) }
    }

    /// Restores persisted entries, skipping those older than `maxAge` at `now` (a nonce lives
    /// only minutes; a stale one would cost a challenge anyway). An entry already in the cache
    /// and received later than the imported one is kept: the latest value wins.
    public func importEntries(_ imported: [Entry], now: Date = Date(), maxAge: TimeInterval = 180) {
        entries.withLock { entries in
            for entry in imported where now.timeIntervalSince(entry.receivedAt) <= maxAge && !entry.nonce.isEmpty {
                let key = Key(account: entry.account, origin: entry.origin)
                if let current = entries[key], current.receivedAt > entry.receivedAt { continue }
                entries[key] = entry
            }
        }
    }
}

extension DPoPNonceCache.Entry: CustomStringConvertible {
    public var description: String { "DPoP nonce for \(account) at \(origin)" }
}
