import Foundation

/// Bearer authentication with the reference PDS's answers: missing → 401 `AuthMissing`,
/// unverifiable → 400 `InvalidToken`, expired → 400 `ExpiredToken`, wrong kind → 400
/// `InvalidToken` "Bad token scope". A token whose session ended → 401 `InvalidToken`.
extension PDSService {
    struct Authenticated {
        let account: AccountState
        let claims: TokenClaims
    }

    private func bearerToken(_ request: TestbedRequest) throws(XRPCError) -> String? {
        guard let header = request.headers.first(name: "authorization") else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" || parts[0].lowercased() == "dpop" else {
            throw XRPCError(.badRequest, "InvalidToken", "Unexpected authorization type")
        }
        return String(parts[1]).trimmingCharacters(in: .whitespaces)
    }

    private static let missing = XRPCError(.unauthorized, "AuthMissing", "Authentication Required")
    private static let unverifiable = XRPCError(.badRequest, "InvalidToken", "Token could not be verified")
    private static let expired = XRPCError(.badRequest, "ExpiredToken", "Token has expired")
    private static let badScope = XRPCError(.badRequest, "InvalidToken", "Bad token scope")
    private static let dpopTokenAsBearer = XRPCError(.badRequest, "InvalidToken", "DPoP-bound token used as a Bearer token")

    /// An access token, required; counts `authenticatedCalls` or `expiredAccessRejections`.
    func authenticateAccess(_ request: TestbedRequest) throws(XRPCError) -> Authenticated {
        guard let authenticated = try authenticateAccessIfPresent(request) else { throw Self.missing }
        return authenticated
    }

    /// Like `authenticateAccess`, but a request without `Authorization` is let through (nil).
    func authenticateAccessIfPresent(_ request: TestbedRequest) throws(XRPCError) -> Authenticated? {
        if let dpopToken = try dpopAccessToken(request) { return try authenticateDPoP(request, token: dpopToken) }
        guard let token = try bearerToken(request) else { return nil }
        let claims: TokenClaims
        switch context.signer.verify(token, now: context.clock.now()) {
        case .success(let verified):
            claims = verified
        case .failure(.expired(let expiredClaims)):
            context.accounts.account(did: expiredClaims.sub)?.data.withLock { $0.stats.expiredAccessRejections += 1 }
            throw Self.expired
        case .failure:
            // A DPoP-bound token is worthless without its key's proof: never accept it as Bearer.
            if context.oauth.issuer.tokens.verify(token) != nil { throw Self.dpopTokenAsBearer }
            throw Self.unverifiable
        }
        guard claims.scope == TokenScope.access || claims.scope == TokenScope.appPassword else { throw Self.badScope }
        guard let account = context.accounts.account(did: claims.sub) else { throw Self.unverifiable }
        _ = try checkHosted(account, request: request) { Self.unverifiable }
        let live = account.data.withLock { data in
            let live = data.accessTokenIsLive(jti: claims.jti)
            if live { data.stats.authenticatedCalls += 1 }
            return live
        }
        guard live else { throw XRPCError(.unauthorized, "InvalidToken", "Token has been revoked") }
        return Authenticated(account: account, claims: claims)
    }

    /// A refresh token (refreshSession, deleteSession). Failures count `rejectedRefreshes`
    /// when `countRejections` and the token names an account.
    func authenticateRefresh(_ request: TestbedRequest, countRejections: Bool) throws(XRPCError) -> Authenticated {
        if try dpopAccessToken(request) != nil { throw Self.badScope }
        guard let token = try bearerToken(request) else { throw Self.missing }
        func reject(_ error: XRPCError, did: String?) -> XRPCError {
            if countRejections, let did {
                context.accounts.account(did: did)?.data.withLock { $0.stats.rejectedRefreshes += 1 }
            }
            return error
        }
        switch context.signer.verify(token, now: context.clock.now()) {
        case .success(let claims):
            guard claims.scope == TokenScope.refresh else { throw reject(Self.badScope, did: claims.sub) }
            guard let account = context.accounts.account(did: claims.sub) else { throw Self.unverifiable }
            return Authenticated(account: account, claims: claims)
        case .failure(.expired(let claims)):
            throw reject(Self.expired, did: claims.sub)
        case .failure:
            throw Self.unverifiable
        }
    }
}
