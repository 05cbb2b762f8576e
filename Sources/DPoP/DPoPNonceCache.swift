import Foundation
import Synchronization

/// The latest `DPoP-Nonce` of each server, per account, and the newest of each server.
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

    private struct State {
        /// (account, origin) → that account's latest nonce from that server, in one flat table:
        /// at 100,000 accounts a table per account would cost more than the nonces.
        var byKey: [Key: Entry] = [:]
        /// The newest nonce each server gave anyone: servers issue nonces for all their
        /// clients (the atproto reference rotates one per server), so an account whose own is
        /// minutes old (an idle account's next refresh) need not pay a challenge for a new one.
        /// Its keys are also every origin known, few enough to look an account's entries up by.
        var newestByOrigin: [String: Entry] = [:]

        mutating func remember(_ entry: Entry) {
            var entry = entry
            if let newest = newestByOrigin[entry.origin] {
                // Share the strings most entries have in common with the server's newest.
                entry.origin = newest.origin
                if newest.nonce == entry.nonce { entry.nonce = newest.nonce }
            }
            byKey[Key(account: entry.account, origin: entry.origin)] = entry
            if let newest = newestByOrigin[entry.origin], newest.receivedAt > entry.receivedAt { return }
            newestByOrigin[entry.origin] = entry
        }

        func entries(account: String) -> [Entry] {
            newestByOrigin.keys.compactMap { byKey[Key(account: account, origin: $0)] }
        }

        mutating func removeAll(account: String) -> [Entry] {
            newestByOrigin.keys.compactMap { byKey.removeValue(forKey: Key(account: account, origin: $0)) }
        }
    }

    private let state = Mutex(State())
    private let challenges = Atomic(0)

    public init() {}

    /// Nonce challenges answered by signing again, in all (for metrics).
    public var challengesAnswered: Int { challenges.load(ordering: .relaxed) }

    /// A server's `use_dpop_nonce` challenge is being answered with its new nonce.
    public func noteChallenge() {
        challenges.add(1, ordering: .relaxed)
    }

    /// The nonce to put in the next proof for `account` to `origin`: the newer of the account's
    /// own and the newest the server gave any account; nil when neither is known.
    public func nonce(account: String, origin: String) -> String? {
        state.withLock { state in
            let own = state.byKey[Key(account: account, origin: origin)]
            guard let shared = state.newestByOrigin[origin] else { return own?.nonce }
            guard let own, own.receivedAt >= shared.receivedAt else { return shared.nonce }
            return own.nonce
        }
    }

    /// Remembers `nonce` (the latest value wins); `nil` or empty leaves the cache as it was, so
    /// it can be fed the `DPoP-Nonce` header of every response without checking it first.
    public func update(account: String, origin: String, nonce: String?, receivedAt: Date = Date()) {
        guard let nonce, !nonce.isEmpty else { return }
        state.withLock { $0.remember(Entry(account: account, origin: origin, nonce: nonce, receivedAt: receivedAt)) }
    }

    /// Drops what was remembered for `account` (logout, removal). A server's newest nonce stays:
    /// it is the server's, not the account's.
    public func forget(account: String) {
        state.withLock { _ = $0.removeAll(account: account) }
    }

    /// Moves `from`'s nonces to `to`, keeping any newer one `to` already has: at login the PAR
    /// and code exchange run before the DID is known (under, say, the handle), and the session
    /// then continues under the DID without paying a fresh challenge.
    public func move(from: String, to: String) {
        state.withLock { state in
            for entry in state.removeAll(account: from) {
                if let current = state.byKey[Key(account: to, origin: entry.origin)], current.receivedAt > entry.receivedAt { continue }
                state.remember(Entry(account: to, origin: entry.origin, nonce: entry.nonce, receivedAt: entry.receivedAt))
            }
        }
    }

    /// One account's nonces, by origin: what the daemon persists after a rotation, in time
    /// independent of how many accounts there are.
    public func entries(account: String) -> [Entry] {
        state.withLock { $0.entries(account: account) }.sorted { $0.origin < $1.origin }
    }

    /// Everything remembered, for persisting; sorted so the output is stable.
    public func exported() -> [Entry] {
        state.withLock { Array($0.byKey.values) }.sorted { ($0.account, $0.origin) < ($1.account, $1.origin) }
    }

    /// Restores persisted entries, skipping those older than `maxAge` at `now` (a nonce lives
    /// only minutes; a stale one would cost a challenge anyway). An entry already in the cache
    /// and received later than the imported one is kept: the latest value wins.
    public func importEntries(_ imported: [Entry], now: Date = Date(), maxAge: TimeInterval = 180) {
        state.withLock { state in
            for entry in imported where now.timeIntervalSince(entry.receivedAt) <= maxAge && !entry.nonce.isEmpty {
                if let current = state.byKey[Key(account: entry.account, origin: entry.origin)],
                   current.receivedAt > entry.receivedAt { continue }
                state.remember(entry)
            }
        }
    }
}

extension DPoPNonceCache.Entry: CustomStringConvertible {
    public var description: String { "DPoP nonce for \(account) at \(origin)" }
}
