import Foundation

/// The revocation endpoint (RFC 7009): revoking a refresh token or an access token ends its
/// whole session. Answers 200 whether or not the token was known, as the RFC asks.
extension AuthorizationServer {
    func revoke(_ request: TestbedRequest) throws(OAuthFailure) -> TestbedResponse {
        let form = try form(request)
        let token = try required("token", in: form)
        let sessionID = state.storage.withLock { storage -> String? in
            if let entry = storage.refreshTokens[token] { return entry.sessionID }
            return state.tokens.verify(token).flatMap { storage.accessTokens[$0.jti] }
        }
        let session = sessionID.flatMap { id in state.storage.withLock { $0.sessions[id] } }
        // A proof is optional here, but one that is sent must be valid (nonce included).
        if request.headers.first(name: "dpop") != nil {
            _ = try verifyProof(request, boundThumbprint: session?.thumbprint, did: session?.did)
        }
        // A client that names itself must be able to authenticate (confidential clients sign).
        if form["client_id"] != nil { _ = try authenticatedClient(form, did: session?.did) }
        if let session {
            let ended = state.storage.withLock { $0.deleteSession(session.id) }
            if ended { oauth.metrics.record(did: session.did) { $0.revocations += 1 } }
        }
        return TestbedResponse(status: .ok)
    }
}
