import Crypto
import DPoP
import Foundation
import JSONRPC
import WebBasics

/// The token endpoint: the authorization code grant (PKCE, same DPoP key as PAR) and the
/// refresh grant (single-use refresh tokens; a replay deletes the whole session).
extension AuthorizationServer {
    func token(_ request: TestbedRequest) throws(OAuthFailure) -> TestbedResponse {
        let form = try form(request)
        let clientID = try required("client_id", in: form)
        switch try required("grant_type", in: form) {
        case "authorization_code": return try exchangeCode(request, form: form, clientID: clientID)
        case "refresh_token": return try refresh(request, form: form, clientID: clientID)
        case let other: throw OAuthFailure(.badRequest, "unsupported_grant_type", "Unsupported grant_type \(other)")
        }
    }

    private func exchangeCode(_ request: TestbedRequest, form: [String: String], clientID: String)
        throws(OAuthFailure) -> TestbedResponse
    {
        let code = try required("code", in: form)
        let redirectURI = try required("redirect_uri", in: form)
        let verifier = try required("code_verifier", in: form)
        guard let issued = state.storage.withLock({ $0.codes[code] }) else { throw rejectGrant("Invalid code", did: nil) }
        // The proof is checked before the code is spent, so a nonce challenge does not waste it.
        _ = try verifyProof(request, boundThumbprint: issued.request.thumbprint, did: issued.did)
        let (client, clientKeyID) = try authenticatedClient(form, did: issued.did)
        let now = context.clock.now()
        let redeemed = state.storage.withLock { storage -> IssuedCode? in
            guard var entry = storage.codes[code], !entry.used else { return nil }
            entry.used = true
            storage.codes[code] = entry
            return entry
        }
        guard let redeemed else { throw rejectGrant("Code replayed", did: issued.did) }
        guard now < redeemed.expiresAt else { throw rejectGrant("Code expired", did: issued.did) }
        guard redeemed.request.clientID == clientID else { throw rejectGrant("Code was issued to another client", did: issued.did) }
        guard redeemed.request.clientKeyID == clientKeyID else {
            throw rejectGrant("Client authentication key changed during the session", did: issued.did)
        }
        guard redeemed.request.redirectURI == redirectURI else { throw rejectGrant("Invalid redirect_uri", did: issued.did) }
        guard Self.s256(verifier) == redeemed.request.codeChallenge else {
            throw rejectGrant("Invalid code_verifier", did: issued.did)
        }
        let lifetime = client.isConfidential
            ? context.configuration.oauthConfidentialSessionLifetime : context.configuration.oauthSessionLifetime
        let session = OAuthSession(
            id: Encodings.randomToken(), did: redeemed.did, clientID: clientID, thumbprint: redeemed.request.thumbprint,
            scope: redeemed.request.scope, clientKeyID: clientKeyID, expiresAt: now.addingTimeInterval(lifetime.seconds))
        let answer = state.storage.withLock { storage in
            storage.sessions[session.id] = session
            return issueTokens(for: session, now: now, storage: &storage)
        }
        oauth.metrics.record(did: session.did) { $0.tokenExchanges += 1 }
        return answer
    }

    private enum RefreshOutcome {
        /// `margin`: the previous access token's remaining life, nil when unknown.
        case rotated(TestbedResponse, did: String, margin: Double?)
        case refused(String, did: String?)
        case replayed(did: String)
    }

    private func refresh(_ request: TestbedRequest, form: [String: String], clientID: String)
        throws(OAuthFailure) -> TestbedResponse
    {
        let refreshToken = try required("refresh_token", in: form)
        let binding = state.storage.withLock { storage -> OAuthSession? in
            storage.refreshTokens[refreshToken].flatMap { storage.sessions[$0.sessionID] }
        }
        guard let binding else { throw rejectGrant("Invalid refresh token", did: nil) }
        _ = try verifyProof(request, boundThumbprint: binding.thumbprint, did: binding.did)
        let (_, clientKeyID) = try authenticatedClient(form, did: binding.did)
        let now = context.clock.now()
        let outcome = state.storage.withLock { storage -> RefreshOutcome in
            guard let entry = storage.refreshTokens[refreshToken], let session = storage.sessions[entry.sessionID] else {
                return .refused("Invalid refresh token", did: binding.did)
            }
            if entry.used {
                // Theft or a client refreshing twice: the reference server ends the whole session.
                storage.deleteSession(session.id)
                return .replayed(did: session.did)
            }
            guard session.clientID == clientID else { return .refused("Refresh token was issued to another client", did: session.did) }
            guard session.clientKeyID == clientKeyID else {
                return .refused("Client authentication key changed during the session", did: session.did)
            }
            guard now < session.expiresAt else {
                storage.deleteSession(session.id)
                return .refused("Session expired", did: session.did)
            }
            guard now < entry.expiresAt else { return .refused("Refresh token expired", did: session.did) }
            storage.refreshTokens[refreshToken]!.used = true
            let margin = storage.latestAccessExpiry[session.id].map { $0.timeIntervalSince(now) }
            return .rotated(issueTokens(for: session, now: now, storage: &storage), did: session.did, margin: margin)
        }
        switch outcome {
        case .rotated(let response, let did, let margin):
            let lost = oauth.misbehaviours.takeLostRefreshResponse()
            oauth.metrics.record(did: did) {
                $0.refreshes += 1
                if lost { $0.lostRefreshResponses += 1 }
                if let margin, margin < 0 { $0.refreshesAfterAccessExpiry += 1 }
            }
            if let margin { oauth.refreshMargins.record(OAuthRefreshMargin(did: did, refreshedAt: now, seconds: margin)) }
            guard !lost else {
                var dropped = TestbedResponse()
                dropped.dropsConnection = true
                return dropped
            }
            var delayed = response
            if context.configuration.refreshLatency > .zero { delayed.delay = context.configuration.refreshLatency }
            return delayed
        case .refused(let reason, let did):
            throw rejectGrant(reason, did: did)
        case .replayed(let did):
            oauth.metrics.record(did: did) {
                $0.refreshTokenReplays += 1
                $0.sessionsDeletedByReplay += 1
            }
            throw rejectGrant("Refresh token replayed", did: did)
        }
    }

    /// New access and refresh tokens for the session, recorded in `storage`.
    private func issueTokens(for session: OAuthSession, now: Date, storage: inout AuthorizationServerState.Storage)
        -> TestbedResponse
    {
        let lifetime = max(1, Int64(context.configuration.oauthAccessTokenLifetime.seconds.rounded()))
        let issuedAt = Int64(now.timeIntervalSince1970)
        let claims = OAuthAccessClaims(
            issuer: issuer, subject: session.did, audience: context.pdsDID, clientID: session.clientID,
            scope: session.scope, issuedAt: issuedAt, expiresAt: issuedAt + lifetime, jti: Encodings.randomToken(),
            thumbprint: session.thumbprint)
        let refreshToken = "ref-" + Encodings.randomToken(bytes: 32)
        // An unused refresh token lapses: after the session's lifetime for public clients, after
        // the idle limit for confidential ones (whose sessions live far longer).
        let idleLimit = session.clientKeyID == nil
            ? context.configuration.oauthSessionLifetime : context.configuration.oauthConfidentialRefreshIdleLifetime
        storage.recordIssuedTokens(
            sessionID: session.id, accessJTI: claims.jti,
            accessExpiresAt: Date(timeIntervalSince1970: TimeInterval(claims.expiresAt)),
            refreshToken: refreshToken, refreshTokenExpiresAt: now.addingTimeInterval(idleLimit.seconds))
        return .json([
            "access_token": .string(tokens.sign(claims)),
            "token_type": "DPoP",
            "expires_in": .number(Double(lifetime)),
            "refresh_token": .string(refreshToken),
            "scope": .string(session.scope),
            "sub": .string(subject(for: session.did)),
        ])
    }

    private var tokens: OAuthAccessTokenSigner { state.tokens }

    /// The account's DID, or another one when `wrongSubjectInTokens` is on.
    private func subject(for did: String) -> String {
        guard oauth.misbehaviours.isEnabled(.wrongSubjectInTokens) else { return did }
        return context.accounts.all.first { $0.did != did }?.did ?? Identifiers.randomPLC()
    }

    private func rejectGrant(_ reason: String, did: String?) -> OAuthFailure {
        oauth.metrics.record(did: did) { $0.invalidGrants += 1 }
        return .invalidGrant(reason)
    }

    static func s256(_ verifier: String) -> String {
        Base64URL.encode(Array(SHA256.hash(data: Array(verifier.utf8))))
    }
}
