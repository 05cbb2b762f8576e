import AccountStoreCore
import Foundation
import Logging
import OAuth2Client
import XRPC

/// Sessions at other OAuth 2.0 servers: refreshed through the same single-flight path as
/// atproto accounts (write-ahead mark, the rotated token durable before use, one backoff),
/// revoked at logout, their profile read from the server.
extension AccountSession {
    /// The token client of this account's session, with its registered client.
    private func oauth2TokenClient(_ secrets: AccountSecrets, timeout: Duration) throws(SessionError) -> OAuth2TokenClient {
        guard let info = record.oauth, let metadata = info.oauth2Metadata() else {
            throw .protocolViolation("the OAuth 2.0 account has no stored session facts")
        }
        return OAuth2TokenClient(metadata: metadata, client: RegisteredClient(clientID: info.clientID, clientSecret: secrets.oauth2?.clientSecret),
                                 http: environment.oauth.http, timeout: timeout, now: environment.now)
    }

    /// Spends the refresh token once. A server that sends no new refresh token keeps the old
    /// one in force (RFC 6749 §6). Only `invalid_grant` ends the session; a lost answer keeps
    /// the write-ahead mark (the token may be spent).
    func rotateOAuth2(_ old: AccountSecrets, sendBy: ContinuousClock.Instant?) async throws(SessionError) -> RotatedSession {
        guard !old.refreshToken.isEmpty else {
            throw .rejected("the server issued no refresh token; the session ended with its access token")
        }
        // The whole exchange must fit in what is left of the lease.
        var timeout = environment.oauth.timeout
        if let sendBy { timeout = min(timeout, sendBy - ContinuousClock.now) }
        let client = try oauth2TokenClient(old, timeout: timeout)
        let tokens: OAuth2Tokens
        do {
            tokens = try await client.refresh(old.refreshToken)
        } catch {
            throw Self.sessionError(oauth2: error)
        }
        return RotatedSession(did: record.did, accessToken: tokens.accessToken, refreshToken: tokens.refreshToken ?? old.refreshToken,
                              accessExpiresAt: tokens.accessExpiresAt, refreshExpiresAt: nil, handle: nil, scope: tokens.scope)
    }

    static func sessionError(oauth2 error: OAuth2ClientError) -> SessionError {
        switch error {
        case .refused(let answer) where answer.isInvalidGrant:
            return .rejected(answer.errorDescription ?? answer.error)
        case .refused(let answer):
            return .transient(answer.description, retryAfter: answer.retryAfter)
        case .unavailable(let reason, let retryAfter):
            return .transient(reason, retryAfter: retryAfter)
        case .noAnswer, .invalidAnswer:
            // The request may have reached the server and rotated the token.
            return .noAnswer(error.description)
        case .insecureURL, .registrationUnavailable:
            return .protocolViolation(error.description)
        }
    }

    /// A session without a refresh token, asked to refresh (a call found its token expired, a
    /// person asked, its date came): nothing can be sent. Before the end it stays as it is
    /// (said once, `account.sessionEndingSoon`); at the end it needs a new login, with why.
    func endAccessOnlySessionIfDue() async throws(DaemonError) -> AccountSecrets {
        let now = environment.now()
        // A token that never expires (Mastodon's): nothing to do until the server refuses it.
        guard let end = record.sessionEndsAt else { return try await currentSecrets() }
        if end > now.addingTimeInterval(1) {
            warnIfSessionEndsSoon()
            return try await currentSecrets()
        }
        let reason = "the server issued no refresh token and the access token expired at \(end.formatted(.iso8601)); log in again"
        await drive(.refreshFailed(.rejected(reason), startedAt: now, at: now))
        throw .needsLogin(account: id, reason: state.record.stateReason ?? reason)
    }

    /// A session without a refresh token whose token the server's profile endpoint refused (the
    /// user removed the app, or the server revoked it): only a new login helps.
    func endRefusedAccessOnlySession() async {
        let now = environment.now()
        let reason = "the server refused the access token (HTTP 401 from its profile endpoint) and issued no refresh token; log in again"
        await drive(.refreshFailed(.rejected(reason), startedAt: now, at: now))
    }

    /// Logout: revokes the refresh token, then the access token, where the server has a
    /// revocation endpoint. True when it took both (or the one there is).
    func revokeOAuth2Session(_ secrets: AccountSecrets) async -> Bool {
        await Self.revokeOAuth2Tokens(secrets, of: record, environment: environment, logger: logger)
    }

    /// Revokes the tokens of `record`'s session (the current one, or one a login replaced).
    static func revokeOAuth2Tokens(_ secrets: AccountSecrets, of record: AccountRecord, environment: SessionEnvironment,
                                   logger: Logger) async -> Bool {
        guard let info = record.oauth, let metadata = info.oauth2Metadata() else { return false }
        let client = OAuth2TokenClient(metadata: metadata, client: RegisteredClient(clientID: info.clientID, clientSecret: secrets.oauth2?.clientSecret),
                                       http: environment.oauth.http, timeout: environment.oauth.timeout, now: environment.now)
        var revoked = true
        for token in [secrets.refreshToken, secrets.accessToken] where !token.isEmpty {
            do {
                if try await !client.revoke(token) { return false }
            } catch {
                revoked = false
                logger.notice("could not revoke a token", metadata: ["reason": "\(error.description)"])
            }
        }
        return revoked
    }

    /// The client id and registration facts of this account, when it is signed in at `issuer`:
    /// a new login there reuses them.
    func oauth2Registration(issuer: String) async -> (String, OAuth2SessionFacts)? {
        guard record.authKind == .oauth2, let info = record.oauth,
              ProviderSettings.trimmed(info.issuer) == ProviderSettings.trimmed(issuer),
              let facts = try? await currentSecrets().oauth2 else { return nil }
        return (info.clientID, facts)
    }

    /// The person's profile at the server, read with the account's token (refreshed once
    /// when the server refuses it); nil when the server has no profile endpoint.
    func fetchOAuth2Profile() async throws -> AccountProfile? {
        let secrets = try await validSecrets()
        guard let facts = secrets.oauth2, let address = facts.profileURL, let url = URL(string: address) else { return nil }
        let reader = OAuth2ProfileReader(http: environment.oauth.http, timeout: environment.upstreamTimeout)
        let profile: OAuth2Profile
        do {
            profile = try await reader.read(url, accessToken: secrets.accessToken, fields: facts.profileFields)
        } catch .unauthorized {
            guard record.oauth?.clientKind == .oauth2 else {
                await endRefusedAccessOnlySession()
                throw OAuth2ProfileReader.Failure.unauthorized
            }
            let token = try await replaceExpired(token: secrets.accessToken)
            profile = try await reader.read(url, accessToken: token, fields: facts.profileFields)
        }
        return AccountProfile(profile, fetchedAt: environment.now())
    }
}

extension AccountSession {
    /// What an `HTTPCall` needs, in one actor hop: a valid access token and the server's origin.
    /// Seconds since the tokens were issued (the last refresh or the login).
    var tokenAge: TimeInterval { environment.now().timeIntervalSince(record.lastRefreshAt ?? record.createdAt) }

    /// What an `HTTPCall` needs: read where the call runs while the session has it published,
    /// otherwise from the session (`httpTarget`).
    nonisolated func liveHTTPTarget() async throws(DaemonError) -> (token: String, origin: URL, refreshable: Bool) {
        if let target = environment.liveTargets.target(id, owner: self, now: environment.now()), target.isOAuth2 {
            return (target.credentials.token, target.server, target.refreshable)
        }
        return try await httpTarget()
    }

    func httpTarget() async throws(DaemonError) -> (token: String, origin: URL, refreshable: Bool) {
        guard state.record.authKind == .oauth2 else {
            throw .invalidParams("account \(state.record.handle ?? state.record.did) is an atproto account: call it with xrpc.call (or /xrpc/ on the gateway)",
                                 field: "account")
        }
        let secrets = try await validSecrets()
        guard let origin = pdsURL else { throw .internalError("the account's server is not a URL: \(state.record.pds)") }
        publishCallTarget(.bearer(secrets.accessToken), server: origin)
        return (secrets.accessToken, origin, state.record.oauth?.clientKind == .oauth2)
    }
}
