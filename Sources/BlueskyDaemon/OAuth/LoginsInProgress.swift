import ATOAuth
import Foundation
import Synchronization

/// Every OAuth login in progress, found by its id (how bskyctl names it) or by its `state`
/// (how the browser's redirect names it), with the authorization each one waits to complete.
///
/// One owner for both indexes and the pending authorizations, so that no login is in one and
/// missing from the other, and a redirect finds its login without a scan.
final class LoginsInProgress: Sendable {
    private struct Index {
        var byID: [String: OAuthLoginAttempt] = [:]
        var byState: [String: OAuthLoginAttempt] = [:]
    }

    private let index = Mutex(Index())
    /// The protocol's rules for a callback's state: known, single use, fresh, from the issuer.
    private let authorizations: PendingAuthorizations

    init(lifetime: TimeInterval) {
        authorizations = PendingAuthorizations(lifetime: lifetime)
    }

    /// - Parameter authorization: an atproto login's pending authorization; nil for an OAuth
    ///   2.0 login, whose plan checks its own redirect (`AuthorizationCode`) and whose attempt
    ///   is finished once (`OAuthLoginAttempt.claim`).
    func add(_ attempt: OAuthLoginAttempt, authorization: PendingAuthorization?) {
        if let authorization { authorizations.insert(authorization) }
        index.withLock { index in
            index.byID[attempt.id] = attempt
            index.byState[attempt.state] = attempt
        }
    }

    func attempt(id: String) -> OAuthLoginAttempt? {
        index.withLock { $0.byID[id] }
    }

    func attempt(state: String) -> OAuthLoginAttempt? {
        index.withLock { $0.byState[state] }
    }

    /// Checks a callback and consumes its state (see `PendingAuthorizations.complete`).
    func complete(_ callback: AuthorizationCallback, now: Date) throws(CallbackError)
        -> (authorization: PendingAuthorization, code: String)
    {
        try authorizations.complete(callback, now: now)
    }

    /// Why a state that names no login in progress is refused: used before, or never issued.
    /// Asks without consuming: a stray state arriving while a real login is being added must
    /// not use that login's state up.
    func verdict(forStrayState state: String) -> OAuthLoginFailure {
        OAuthLoginFailure(authorizations.verdict(forStrayState: state))
    }

    /// Forgets the logins started longer than `lifetime` ago and returns them (to be ended).
    func removeStale(now: Date) -> [OAuthLoginAttempt] {
        authorizations.removeExpired(now: now)
        return index.withLock { index in
            let stale = index.byID.values.filter { now.timeIntervalSince($0.startedAt) > authorizations.lifetime }
            for attempt in stale {
                index.byID[attempt.id] = nil
                index.byState[attempt.state] = nil
            }
            return stale
        }
    }
}
