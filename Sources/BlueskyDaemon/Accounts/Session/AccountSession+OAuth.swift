import ATOAuth
import AccountStoreCore
import DPoP
import Foundation
import XRPC

/// OAuth sessions: refresh at the token endpoint with the session's DPoP key (through the same
/// single-flight path as app passwords), revocation at logout, nonce persistence.
extension AccountSession {
    /// Rotates an OAuth session's tokens. Failures become `SessionError`s so the shared path
    /// records them: `invalid_grant` keeps the server's reason ("Refresh token replayed",
    /// "Session expired") and needs a login; every other failure keeps the account.
    func rotateOAuth(_ old: AccountSecrets, sendBy: ContinuousClock.Instant?) async throws(SessionError) -> RotatedSession {
        guard let info = record.oauth else { throw .protocolViolation("the OAuth account has no stored session facts") }
        let client: OAuthServerClient
        let key: DPoPKey
        do {
            client = try environment.oauth.serverClient(info, account: id)
            key = try dpopKey(from: old)
        } catch .needsLogin(_, let reason) {
            throw .rejected(reason)
        } catch {
            throw .protocolViolation(error.description)
        }
        let tokens: OAuthTokenSet
        do {
            tokens = try await client.refresh(refreshToken: old.refreshToken, dpopKey: key, did: record.did, sendBy: sendBy)
        } catch {
            persistNonces()
            throw Self.sessionError(error)
        }
        persistNonces()
        warnIfSessionEndsSoon()
        return RotatedSession(did: tokens.did.description, accessToken: tokens.accessToken, refreshToken: tokens.refreshToken,
                              accessExpiresAt: tokens.expiresAt, refreshExpiresAt: info.sessionEndsAt, handle: nil,
                              scope: tokens.scope)
    }

    /// Only `invalid_grant` ends the session: the grant is gone at the server. Everything else
    /// (`invalid_client` while a client's metadata host is down, `server_error`,
    /// `temporarily_unavailable`, a refused proof, HTML error pages, any other 4xx or 5xx)
    /// leaves the grant intact and the account retrying with backoff.
    static func sessionError(_ error: OAuthClientError) -> SessionError {
        switch error {
        case .server(let answer) where answer.isInvalidGrant:
            return .rejected(answer.errorDescription ?? answer.error)
        case .server(let answer):
            return .transient(answer.description, retryAfter: answer.retryAfter)
        case .unexpectedResponse(_, _, let retryAfter):
            return .transient(error.description, retryAfter: retryAfter)
        case .invalidTokenResponse(.subjectMismatch):
            return .rejected(error.description)
        case .transport, .invalidTokenResponse:
            // The request may have reached the server and rotated the token (an answer lost,
            // or a 200 we cannot use): the write-ahead mark stays.
            return .noAnswer(error.description)
        default:
            return .protocolViolation(error.description)
        }
    }

    /// Logs once per daemon run and session when a public client's session is within 48 hours of
    /// its fixed end (the status line says so too): only a new login extends it.
    func warnIfSessionEndsSoon() {
        let now = environment.now()
        guard !warnedSessionEnd, record.sessionEndsSoon(now: now), let end = record.sessionEndsAt else { return }
        warnedSessionEnd = true
        publish(.accountSessionEndingSoon, fields: ["sessionEndsAt": AccountView.timestamp(end)])
        logger.warning("the OAuth session ends soon; log in again to keep the account", metadata: [
            "sessionEndsAt": "\(end.formatted(.iso8601))", "outcome": "session-ending",
        ])
    }

    /// Logout: revokes the refresh token, then the access token (best effort). True when the
    /// server accepted both.
    func revokeOAuthSession(_ secrets: AccountSecrets) async -> Bool {
        guard let info = record.oauth, let client = try? environment.oauth.serverClient(info, account: id), let key = try? dpopKey(from: secrets) else {
            return false
        }
        var revoked = true
        for (token, hint) in [(secrets.refreshToken, OAuthRequests.TokenTypeHint.refreshToken),
                              (secrets.accessToken, .accessToken)] {
            do {
                try await client.revoke(token: token, hint: hint, dpopKey: key, nonceScope: record.did)
            } catch {
                revoked = false
                logger.notice("could not revoke a token", metadata: ["hint": "\(hint.rawValue)", "reason": "\(error.description)"])
            }
        }
        environment.oauth.nonces.forget(account: record.did)
        return revoked
    }

    /// Saves this account's current nonces (after a rotation), off the caller's path.
    nonisolated func persistNonces(did: String) {
        environment.nonceSaver.save(environment.oauth.storedNonces(did: did, account: id))
    }

    func persistNonces() { persistNonces(did: record.did) }
}
