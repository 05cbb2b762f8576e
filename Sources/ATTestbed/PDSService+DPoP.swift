import DPoP
import Foundation
import JSONRPC
import NIOHTTP1

/// OAuth at the PDS: the protected-resource metadata naming its authorization server, and
/// `Authorization: DPoP <token>` checked as the reference PDS does (signature and issuer,
/// expiry, session still live, proof with `ath`, the token's `cnf.jkt` key and a nonce).
/// Refusals are 401 with `WWW-Authenticate: DPoP error="…"`.
extension PDSService {
    /// The `requestCount(nsid:)` key of protected-resource metadata fetches.
    static let protectedResourceMetadataKey = "well-known:oauth-protected-resource"

    /// RFC 9728 metadata: this PDS's resource identifier and its one authorization server.
    func protectedResourceMetadata(_ request: TestbedRequest) -> TestbedResponse {
        // Counted like an NSID, so tests can tell how often clients look the issuer up.
        _ = context.metrics.record(nsid: Self.protectedResourceMetadataKey, proxied: false, now: context.clock.now())
        if let failure = context.failures.take(nsid: OAuthEndpoint.protectedResourceMetadata.failureKey) {
            return .text("injected failure (\(failure.status))", status: HTTPResponseStatus(statusCode: failure.status))
        }
        let alias = request.host == context.pdsAliasHost
        let issuer = alias && context.moves.aliasNamesRogueIssuer ? context.oauth.rogueIssuer : context.oauth.issuer
        return .json([
            "resource": .string(alias ? context.pdsAliasURL : context.pdsURL),
            "authorization_servers": [.string(context.url(host: issuer.host))],
            "scopes_supported": [],
            "bearer_methods_supported": ["header"],
            "resource_documentation": "https://atproto.com",
        ])
    }

    /// The token of `Authorization: DPoP <token>`, nil for other schemes.
    func dpopAccessToken(_ request: TestbedRequest) throws(XRPCError) -> String? {
        guard let header = request.headers.first(name: "authorization") else { return nil }
        // Checked byte-wise first: every Bearer call of the benchmark passes through here.
        let scheme = header.utf8.prefix(5)
        guard scheme.count == 5, scheme.elementsEqual("dpop ".utf8, by: { $0 | 0x20 == $1 }) else { return nil }
        return String(header.dropFirst(5)).trimmingCharacters(in: .whitespaces)
    }

    func authenticateDPoP(_ request: TestbedRequest, token: String) throws(XRPCError) -> Authenticated {
        let oauth = context.oauth
        let now = context.clock.now()
        guard let claims = oauth.issuer.tokens.verify(token), claims.issuer == context.url(host: oauth.issuer.host),
            claims.audience == context.pdsDID
        else {
            oauth.metrics.record(did: nil) { $0.invalidTokenRejections += 1 }
            throw Self.dpopRefusal("invalid_token", "Invalid token")
        }
        let did = claims.subject
        func refuse(_ description: String) -> XRPCError {
            oauth.metrics.record(did: did) { $0.invalidTokenRejections += 1 }
            return Self.dpopRefusal("invalid_token", description)
        }
        guard Double(claims.expiresAt) > now.timeIntervalSince1970 else { throw refuse("Token expired") }
        guard oauth.issuer.storage.withLock({ $0.accessTokenIsLive(jti: claims.jti) }) else {
            throw refuse("Token has been revoked")
        }
        guard let account = context.accounts.account(did: did) else { throw refuse("Unknown account") }
        let served = try checkHosted(account, request: request) { refuse("Account is not hosted here") }
        let proof = request.headers.first(name: "dpop")
        do {
            _ = try oauth.pdsVerifier.verify(
                proof, method: request.method.rawValue, url: served + request.path,
                accessToken: token, boundThumbprint: claims.thumbprint, acceptedNonces: oauth.pdsNonces.accepted())
        } catch .useNonce {
            oauth.metrics.record(did: did) { $0.pdsNonceChallenges += 1 }
            throw Self.dpopRefusal("use_dpop_nonce", DPoPVerificationError.useNonce.description)
        } catch {
            oauth.metrics.record(did: did) { $0.dpopRejections[error.description, default: 0] += 1 }
            throw Self.dpopRefusal(error.oauthError == "invalid_dpop_proof" ? "invalid_dpop_proof" : "invalid_token",
                                   error.description)
        }
        try checkScope(claims.scope, did: did, request: request)
        oauth.metrics.record(did: did) { $0.authenticatedResourceCalls += 1 }
        let recorded = RecordedDPoPRequest(proof: proof ?? "", method: request.method.rawValue, htu: served + request.path,
                                           accessToken: token, boundThumbprint: claims.thumbprint)
        oauth.lastResourceRequests.withLock { $0[did] = recorded }
        let legacyView = TokenClaims(
            scope: TokenScope.access, sub: did, aud: claims.audience, iat: claims.issuedAt, exp: claims.expiresAt,
            jti: claims.jti)
        return Authenticated(account: account, claims: legacyView)
    }

    /// The URL this request reached the account under. The PDS an account moved away from
    /// answers as the reference PDS does for a migrated (deactivated) account: 401
    /// `AccountDeactivated`; the new PDS knows nobody before the move (`notHere`).
    func checkHosted(_ account: AccountState, request: TestbedRequest, notHere: () -> XRPCError) throws(XRPCError) -> String {
        let served = request.host == context.pdsAliasHost ? context.pdsAliasURL : context.pdsURL
        let home = context.pdsURL(ofDID: account.did)
        guard served != home else { return served }
        if served == context.pdsURL {
            account.data.withLock { $0.stats.deactivatedRejections += 1 }
            throw XRPCError(.unauthorized, "AccountDeactivated", "Account is deactivated")
        }
        throw notHere()
    }

    /// 401 with the error in `WWW-Authenticate` (what DPoP clients read) and in the XRPC body.
    static func dpopRefusal(_ error: String, _ description: String) -> XRPCError {
        let escaped = description.replacingOccurrences(of: "\"", with: "'")
        let name = error == "invalid_token" ? "InvalidToken" : error
        return XRPCError(
            .unauthorized, name, description,
            headers: ["WWW-Authenticate": #"DPoP error="\#(error)", error_description="\#(escaped)""#])
    }
}
