import BlueskyHTTP
import DPoP
import Foundation
import JSONRPC
import XRPC

/// Proxied calls of OAuth accounts: `Authorization: DPoP` with a proof carrying `ath`, one retry
/// on a nonce challenge (inside `DPoPResourceClient`), and one refresh-and-retry when the PDS
/// refuses the token.
extension XRPCProxy {
    func callWithDPoP(_ request: XRPCRequest, credentials: AccountSession.CallCredentials, session: AccountSession,
                      upstream: UpstreamTime? = nil)
        async throws(DaemonError) -> (response: InboundResponse, refusedAfterRefresh: Bool)
    {
        guard case .dpop(let token, let key, let did) = credentials else { throw .internalError("not a DPoP session") }
        var response = try await sendDPoP(request, token: token, key: key, did: did, session: session, upstream: upstream)
        guard Self.isRefusedToken(response), !Self.isAccountDeactivated(response) else { return (response, false) }
        let fresh = try await session.replaceExpired(token: token)
        response = try await sendDPoP(request, token: fresh, key: key, did: did, session: session, upstream: upstream)
        return (response, Self.isRefusedToken(response))
    }

    private func sendDPoP(_ request: XRPCRequest, token: String, key: DPoPKey, did: String,
                          session: AccountSession, upstream: UpstreamTime?) async throws(DaemonError) -> InboundResponse {
        let oauth = environment.oauth
        let outbound = request.outbound(authorization: nil)
        let origin = (try? HTTPTargetURI(outbound.url))?.origin ?? ""
        let before = oauth.nonces.nonce(account: did, origin: origin)
        let response: InboundResponse
        do {
            // Timed inside the client: the proof's signing is blueskyd's time, the exchange the PDS's.
            let http: any HTTPFetching = upstream.map { TimedHTTP(base: environment.http, upstream: $0) } ?? environment.http
            response = try await oauth.resourceClient(http: http)
                .send(outbound, accessToken: token, dpopKey: key, account: did, timeout: environment.upstreamTimeout)
        } catch {
            throw .upstreamUnavailable(error.description)
        }
        // Persist a nonce only when it rotated: once a minute or so, never per call.
        if oauth.nonces.nonce(account: did, origin: origin) != before { session.persistNonces(did: did) }
        return response
    }

    /// The PDS refused the DPoP-bound token: expired, revoked or unknown (`invalid_token`), or
    /// the reference PDS's `ExpiredToken`.
    static func isRefusedToken(_ response: InboundResponse) -> Bool {
        if case .invalidToken = DPoPChallenge.classify(status: response.status, wwwAuthenticate: response.header("WWW-Authenticate"),
                                                       body: response.body) { return true }
        return isExpiredToken(response)
    }
}
