import ATOAuth
import AccountStoreCore
import Foundation
import OAuth2Client

/// The end of a login at another OAuth 2.0 server: the redirect checked (state, `iss`), the
/// code exchanged, the profile read to learn who signed in, and the account stored (new, or a
/// known one signed in again in place).
extension AccountManager {
    func exchangeAndStore(_ attempt: OAuthLoginAttempt, plan: OAuth2LoginPlan, callback: AuthorizationCallback) async throws(DaemonError) -> UUID {
        var fields: [String: String] = [:]
        fields["code"] = callback.code
        fields["state"] = callback.state
        fields["iss"] = callback.issuer
        fields["error"] = callback.error
        fields["error_description"] = callback.errorDescription
        let code: String
        do {
            code = try plan.request.code(fromFields: fields)
        } catch {
            throw .oauthLogin(Self.loginFailure(error))
        }
        let tokenClient = OAuth2TokenClient(metadata: plan.metadata, client: plan.request.client, http: environment.oauth.http,
                                            timeout: environment.oauth.timeout, now: environment.now)
        let tokens: OAuth2Tokens
        do {
            tokens = try await tokenClient.exchange(code: code, verifier: plan.request.pkce.verifier, redirectURI: plan.request.redirectURI)
        } catch {
            throw .oauthLogin(Self.loginFailure(error))
        }
        let now = environment.now()
        let person = try await whoSignedIn(plan, accessToken: tokens.accessToken, now: now)
        let did = OAuth2AccountKey.make(issuer: plan.metadata.issuer, subject: person.subject)
        if let expected = attempt.expectedDID, expected != did {
            throw .oauthLogin(.subjectMismatch(expected: expected, actual: did))
        }
        let info = OAuthSessionInfo(
            issuer: plan.metadata.issuer, tokenEndpoint: plan.metadata.tokenEndpoint.absoluteString,
            revocationEndpoint: plan.metadata.revocationEndpoint?.absoluteString, scope: tokens.scope ?? plan.request.scope,
            sessionStartedAt: now, clientKind: tokens.refreshToken == nil ? .oauth2AccessOnly : .oauth2,
            clientID: plan.request.client.clientID)
        let secrets = AccountSecrets(accessToken: tokens.accessToken, refreshToken: tokens.refreshToken ?? "", oauth2: plan.facts)
        let handle = OAuth2AccountKey.handle(person.handle, apiOrigin: plan.apiOrigin)
        // The server speaks for its own accounts: a handle on its own host is verified by the
        // login; another (`bob@elsewhere`) is shown but names nothing.
        let record = AccountRecord(
            id: UUID(), did: did, handle: handle, handleVerified: handle.map { OAuth2AccountKey.isOwn($0, apiOrigin: plan.apiOrigin) } ?? false,
            pds: plan.apiOrigin, authKind: .oauth2,
            state: .active, createdAt: now, updatedAt: now, lastRefreshAt: now, accessExpiresAt: tokens.accessExpiresAt,
            refreshExpiresAt: tokens.refreshToken == nil ? tokens.accessExpiresAt : nil, oauth: info,
            profile: person.profile)
        let (saved, session, replaced) = try await register(record, secrets: secrets, settle: Self.keepingRefreshToken)
        // The replaced session is revoked where a revocation ends that one token's grant alone
        // (Mastodon-style servers: an app authorisation per login). Elsewhere (an SSO server)
        // revoking it may end the user's whole session, the new tokens with it: it is left to
        // expire there. A refresh token kept from it is not revoked, of course.
        if let replaced, let replacedSecrets = replaced.replacedSecrets, plan.metadata.appRegistrationEndpoint != nil,
           replacedSecrets.refreshToken.isEmpty || replacedSecrets.refreshToken != replaced.secrets.refreshToken,
           replacedSecrets.accessToken != replaced.secrets.accessToken {
            background.start(.login) { [environment] in
                _ = await AccountSession.revokeOAuth2Tokens(replacedSecrets, of: replaced.replacedRecord, environment: environment,
                                                        logger: self.logger)
            }
        }
        // A login starts the profile afresh: the cache of an earlier session is not this one's.
        if let profile = person.profile { await session.adoptProfile(profile) }
        if registry.needsDefault || attempt.makeDefault { _ = try await setDefault(saved.id.uuidString) }
        return saved.id
    }

    /// Servers often send no new refresh token to a client signing in again (Google does): the
    /// one the replaced session holds *now*, of the same client, stays good, and the session
    /// keeps its upkeep.
    static func keepingRefreshToken(_ proposed: AccountRecord, _ secrets: AccountSecrets, replacedRecord: AccountRecord,
                                    _ replacedSecrets: AccountSecrets?) -> (AccountRecord, AccountSecrets) {
        guard secrets.refreshToken.isEmpty, let held = replacedSecrets?.refreshToken, !held.isEmpty,
              replacedRecord.oauth?.clientID == proposed.oauth?.clientID, replacedRecord.oauth?.clientKind == .oauth2 else {
            return (proposed, secrets)
        }
        var (record, kept) = (proposed, secrets)
        kept.refreshToken = held
        record.oauth?.clientKind = .oauth2
        record.refreshExpiresAt = nil
        return (record, kept)
    }

    /// The person the tokens belong to: the server's profile (its subject, handle and what a
    /// profile shows), else the `sub` of a JWT access token.
    private func whoSignedIn(_ plan: OAuth2LoginPlan, accessToken: String, now: Date) async throws(DaemonError)
        -> (subject: String, handle: String?, profile: AccountProfile?)
    {
        if let url = plan.profileURL {
            do {
                let profile = try await OAuth2ProfileReader(http: environment.oauth.http, timeout: environment.oauth.timeout)
                    .read(url, accessToken: accessToken, fields: plan.profileFields)
                return (profile.subject, profile.handle, AccountProfile(profile, fetchedAt: now))
            } catch .unavailable(let reason) {
                throw .oauthLogin(.serverUnavailable("reading who signed in: \(reason)"))
            } catch {
                throw .oauthLogin(.tokenResponseInvalid("reading who signed in from \(url.absoluteString): \(error.description)"))
            }
        }
        guard let subject = JWTSubject.of(accessToken) else {
            throw .oauthLogin(.tokenResponseInvalid(
                "\(plan.metadata.issuer) offers no profile endpoint and its access token names no subject: configure profile_url in a [[provider]]"))
        }
        return (subject, nil, nil)
    }

    static func loginFailure(_ error: AuthorizationCallbackError) -> OAuthLoginFailure {
        switch error {
        case .stateMismatch: .stateUnknown
        case .issuerMismatch(let expected, let actual): .issuerMismatch(expected: expected, actual: actual)
        case .denied(let detail): .authorizationDenied(detail)
        case .malformed(let detail): .callbackInvalid(detail)
        }
    }

    static func loginFailure(_ error: OAuth2ClientError) -> OAuthLoginFailure {
        switch error {
        case .unavailable, .noAnswer: .serverUnavailable(error.description)
        case .invalidAnswer, .insecureURL: .tokenResponseInvalid(error.description)
        case .refused, .registrationUnavailable: .serverRefused(error.description)
        }
    }
}

extension AccountProfile {
    /// What a profile shows of an OAuth 2.0 server's account, cut to the lengths a Bluesky
    /// profile allows (a hostile server could send megabytes).
    init(_ profile: OAuth2Profile, fetchedAt: Date) {
        func cut(_ text: String?, _ limit: Int) -> String? {
            guard let text, !text.isEmpty else { return nil }
            return text.utf8.count > limit ? String(decoding: text.utf8.prefix(limit), as: UTF8.self) : text
        }
        let avatar = profile.avatar.flatMap { URL(string: $0)?.scheme == "https" ? $0 : nil }
        self.init(displayName: cut(profile.displayName, 640), avatar: cut(avatar, 2_048), description: cut(profile.description, 2_560),
                  fetchedAt: fetchedAt)
    }
}
