import Foundation
import Synchronization

/// What a proxied call needs of an account whose tokens are live (its credentials and its
/// server), published by the account's session so that a call reads it where it runs, with no
/// hop to the session's actor (docs/PERFORMANCE.md, "what a call costs").
///
/// The session stays the one owner: it publishes a target only from its current state (after
/// the last suspension of `callTarget`/`httpTarget`, with the tokens of the state's version),
/// and withdraws it on every input it applies, before anything else sees the new state. So a
/// target read here is never older than the session's state, and a change (a refresh, a
/// logout, a move to another PDS, `needsLogin`) takes effect for the next call. A target also
/// carries the moment its access token stops being usable (the margin `validSecrets` keeps):
/// past it, the call goes to the session, which refreshes. Only accounts making calls are
/// here, so an idle registry of a million accounts holds nothing.
///
/// Each target names the session that published it, and only that session reads or withdraws
/// it: a session dropped from the registry (the store no longer holds its account) and a new
/// one under the same id never see each other's tokens or server. A session publishes only
/// while the registry holds it, checked under this table's lock, and forgetting an account
/// withdraws its target, so nothing stays behind.
final class LiveCallTargets: Sendable {
    struct Target: Sendable {
        var credentials: AccountSession.CallCredentials
        /// The PDS (atproto) or the OAuth 2.0 server's origin.
        var server: URL
        /// An OAuth 2.0 server's account, called with `http.call`; atproto accounts with `xrpc.call`.
        var isOAuth2: Bool
        /// The server's refresh can replace a refused token (OAuth 2.0 accounts).
        var refreshable: Bool
        var usableUntil: Date
        /// The session that published it.
        var owner: ObjectIdentifier
    }

    private let targets = Mutex<[UUID: Target]>([:])

    /// The target `owner` published for account `id`, while its access token is usable at `now`.
    func target(_ id: UUID, owner: AccountSession, now: Date) -> Target? {
        guard let target = targets.withLock({ $0[id] }), target.owner == ObjectIdentifier(owner), target.usableUntil > now
        else { return nil }
        return target
    }

    /// Called by the session only, on its actor: publishes `target` if `registered` still holds
    /// (asked under the lock, so that a session forgotten meanwhile leaves nothing behind).
    /// True when published.
    func publish(_ target: Target, for id: UUID, if registered: () -> Bool) -> Bool {
        targets.withLock { targets in
            guard registered() else { return false }
            targets[id] = target
            return true
        }
    }

    /// Withdraws what `owner` published for `id`; another session's target stays.
    func withdraw(_ id: UUID, owner: AccountSession) {
        targets.withLock { targets in
            if targets[id]?.owner == ObjectIdentifier(owner) { targets[id] = nil }
        }
    }

    /// How many accounts have a target published (tests).
    var count: Int { targets.withLock { $0.count } }
}
