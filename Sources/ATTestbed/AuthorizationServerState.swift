import DPoP
import Foundation
import Synchronization

/// A pushed authorization request, as stored until the authorize endpoint uses it.
struct PushedRequest: Sendable {
    let clientID: String
    let redirectURI: String
    let scope: String
    let state: String?
    let codeChallenge: String
    /// The account `login_hint` named, resolved at PAR time.
    let loginHintDID: String?
    /// The `kid` a confidential client authenticated with; the whole session must keep it.
    let clientKeyID: String?
    /// The PAR proof's key: the code exchange must use the same one.
    let thumbprint: String
    let expiresAt: Date
}

/// An authorization code: single-use, short-lived, for one approved request.
struct IssuedCode: Sendable {
    let request: PushedRequest
    let did: String
    let expiresAt: Date
    var used = false
}

/// One login's grant: its DPoP key, client and scope, kept across refreshes.
struct OAuthSession: Sendable {
    let id: String
    let did: String
    let clientID: String
    let thumbprint: String
    let scope: String
    let clientKeyID: String?
    /// Public clients' sessions end this long after login, however often they refresh.
    let expiresAt: Date
}

/// A refresh token: single-use; a second use deletes its session.
struct RefreshTokenEntry: Sendable {
    let sessionID: String
    let expiresAt: Date
    var used = false
}

/// The state of one authorization server (issuer): requests, codes, sessions and tokens, its
/// nonces, DPoP verifier and token key. Its lock is held only for in-memory work.
final class AuthorizationServerState: Sendable {
    struct Storage {
        var pushedRequests: [String: PushedRequest] = [:]
        var codes: [String: IssuedCode] = [:]
        var sessions: [String: OAuthSession] = [:]
        var refreshTokens: [String: RefreshTokenEntry] = [:]
        /// Access token `jti` → session, so deleting a session stops its access tokens.
        var accessTokens: [String: String] = [:]
        /// Session → expiry of its newest access token: a refresh's margin is measured against it.
        var latestAccessExpiry: [String: Date] = [:]
    }

    /// The host the server answers on (`auth.<domain>` or `rogue-auth.<domain>`).
    let host: String
    let tokens = OAuthAccessTokenSigner()
    let nonces: DPoPNonceSource
    let verifier: DPoPVerifier
    let assertions: ClientAssertionVerifier
    let storage = Mutex(Storage())

    init(host: String, clock: TestbedClock, noncePeriod: Duration) {
        self.host = host
        nonces = DPoPNonceSource(period: noncePeriod, clock: clock)
        verifier = DPoPVerifier(now: { clock.now() })
        assertions = ClientAssertionVerifier(now: { clock.now() })
    }
}

extension AuthorizationServerState.Storage {
    /// Ends a session with all its refresh and access tokens; returns whether it existed.
    @discardableResult
    mutating func deleteSession(_ id: String) -> Bool {
        guard sessions.removeValue(forKey: id) != nil else { return false }
        latestAccessExpiry[id] = nil
        refreshTokens = refreshTokens.filter { $0.value.sessionID != id }
        accessTokens = accessTokens.filter { $0.value != id }
        return true
    }

    /// Records an access token and a refresh token issued for a session, by a grant or by minting.
    mutating func recordIssuedTokens(sessionID: String, accessJTI: String, accessExpiresAt: Date,
                                     refreshToken: String, refreshTokenExpiresAt: Date) {
        accessTokens[accessJTI] = sessionID
        latestAccessExpiry[sessionID] = accessExpiresAt
        refreshTokens[refreshToken] = RefreshTokenEntry(sessionID: sessionID, expiresAt: refreshTokenExpiresAt)
    }

    /// Forgets requests and codes past their lifetime, so a long run does not accumulate them.
    mutating func pruneExpired(now: Date) {
        pushedRequests = pushedRequests.filter { $0.value.expiresAt > now }
        codes = codes.filter { $0.value.expiresAt > now }
    }

    /// Whether an access token (already signature-checked) still belongs to a live session.
    func accessTokenIsLive(jti: String) -> Bool {
        guard let sessionID = accessTokens[jti] else { return false }
        return sessions[sessionID] != nil
    }

    func liveSessionCount(did: String) -> Int {
        sessions.values.count { $0.did == did }
    }
}
