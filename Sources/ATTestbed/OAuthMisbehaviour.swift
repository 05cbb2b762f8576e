import Synchronization

/// Ways the testbed's authorization server can break the rules on demand, so clients can be
/// shown to notice. Switched with `Testbed.setOAuthMisbehaviour(_:enabled:)`.
public enum OAuthMisbehaviour: Sendable, Hashable, CaseIterable {
    /// The authorize redirect carries the rogue issuer's URL as `iss`.
    case wrongIssuerInRedirect
    /// Token answers name another DID in `sub` than the account the tokens are for (another
    /// testbed account when there is one, else an unregistered `did:plc`).
    case wrongSubjectInTokens
    /// The authorization servers and the PDS send a new random nonce on every response and accept
    /// only the latest one.
    case newNonceOnEveryResponse
}

/// The OAuth endpoints failures can be injected into (`Testbed.injectOAuthFailures`).
public enum OAuthEndpoint: String, Sendable, CaseIterable {
    case metadata, pushedAuthorization, authorize, token, revocation
    /// The PDS's `/.well-known/oauth-protected-resource` (under either of its names).
    case protectedResourceMetadata

    /// The key in the shared failure injector; cannot collide with an NSID.
    var failureKey: String { "oauth:" + rawValue }
}

/// The misbehaviours switched on, and how many refresh answers to drop.
final class OAuthMisbehaviours: Sendable {
    private struct Settings {
        var enabled: Set<OAuthMisbehaviour> = []
        var refreshResponsesToLose = 0
    }

    private let settings = Mutex(Settings())

    func set(_ misbehaviour: OAuthMisbehaviour, enabled: Bool) {
        settings.withLock {
            if enabled { $0.enabled.insert(misbehaviour) } else { $0.enabled.remove(misbehaviour) }
        }
    }

    func isEnabled(_ misbehaviour: OAuthMisbehaviour) -> Bool { settings.withLock { $0.enabled.contains(misbehaviour) } }

    func loseRefreshResponses(count: Int) { settings.withLock { $0.refreshResponsesToLose = max(0, count) } }

    /// True (and one fewer left) when this refresh's answer is to be dropped.
    func takeLostRefreshResponse() -> Bool {
        settings.withLock {
            guard $0.refreshResponsesToLose > 0 else { return false }
            $0.refreshResponsesToLose -= 1
            return true
        }
    }

    func reset() { settings.withLock { $0 = Settings() } }
}
