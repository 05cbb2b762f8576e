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
    }

    private let targets = Mutex<[UUID: Target]>([:])

    /// The published target of account `id`, while its access token is usable at `now`.
    func target(_ id: UUID, now: Date) -> Target? {
        guard let target = targets.withLock({ $0[id] }), target.usableUntil > now else { return nil }
        return target
    }

    /// Called by the session only, on its actor.
    func publish(_ target: Target, for id: UUID) {
        targets.withLock { $0[id] = target }
    }

    /// Called by the session only, on its actor.
    func withdraw(_ id: UUID) {
        _ = targets.withLock { $0.removeValue(forKey: id) }
    }

    /// How many accounts have a target published (tests; the daemon's status).
    var count: Int { targets.withLock { $0.count } }
}
