import BlueskyHTTP
import DPoP
import Foundation
import JSONRPC

/// Talks to one authorization server: PAR, code exchange, refresh and revocation, each a form
/// POST with a DPoP proof (never with `ath`).
///
/// Every response, success or not, updates the nonce cache from `DPoP-Nonce` and the clock-skew
/// estimate from `Date`. A `use_dpop_nonce` challenge that brings a new nonce is retried exactly
/// once; the DPoP key and (for confidential clients) a fresh client assertion are used on each
/// attempt.
public struct OAuthServerClient: Sendable {
    public let endpoints: AuthorizationServerEndpoints
    public let client: ClientAuthentication
    private let http: any HTTPFetching
    private let nonces: DPoPNonceCache
    private let clockSkew: ClockSkewEstimator
    /// The deadline of each request, for its whole answer (a nonce challenge's retry gets its own).
    public let timeout: Duration
    private let now: @Sendable () -> Date

    public init(endpoints: AuthorizationServerEndpoints, client: ClientAuthentication, http: any HTTPFetching,
                nonces: DPoPNonceCache, clockSkew: ClockSkewEstimator, timeout: Duration,
                now: @escaping @Sendable () -> Date = { Date() }) {
        self.endpoints = endpoints
        self.client = client
        self.http = http
        self.nonces = nonces
        self.clockSkew = clockSkew
        self.timeout = timeout
        self.now = now
    }

    /// Pushes the authorization request (RFC 9126) signed with the key the token exchange will use.
    /// - Parameter nonceScope: the nonce cache's account key; before login, e.g. the handle.
    public func pushAuthorization(_ request: AuthorizationRequest, dpopKey: DPoPKey, nonceScope: String)
        async throws(OAuthClientError) -> PushedAuthorizationResponse
    {
        let response = try await post(to: endpoints.pushedAuthorizationRequest, dpopKey: dpopKey, nonceScope: nonceScope) {
            now throws(ClientAssertionError) in
            try request.pushedAuthorizationForm(client: client, issuer: endpoints.issuer, now: now)
        }
        guard response.status == 201 || response.status == 200 else { throw Self.failure(response, endpoint: "PAR") }
        guard let body = try? JSONValue.parse(response.body), let requestURI = body["request_uri"]?.stringValue,
              !requestURI.isEmpty else { throw .invalidPushedAuthorizationResponse }
        return PushedAuthorizationResponse(requestURI: requestURI, expiresIn: body["expires_in"]?.intValue ?? 0)
    }

    /// Exchanges the callback's code for tokens, with the PAR's DPoP key and PKCE verifier.
    ///
    /// The tokens are not trustworthy yet: resolve their `sub` to its PDS and that PDS's
    /// authorization server, and keep them only if it is this issuer (otherwise a malicious
    /// server could hand out tokens for someone else's account).
    public func exchangeCode(_ code: String, for authorization: PendingAuthorization, nonceScope: String)
        async throws(OAuthClientError) -> OAuthTokenSet
    {
        let response = try await post(to: endpoints.token, dpopKey: authorization.dpopKey, nonceScope: nonceScope) {
            now throws(ClientAssertionError) in
            try OAuthRequests.authorizationCodeForm(code: code, redirectURI: authorization.redirectURI,
                                                    codeVerifier: authorization.pkce.verifier, client: client,
                                                    issuer: endpoints.issuer, now: now)
        }
        return try tokens(from: response, expectedDID: authorization.expectedDID)
    }

    /// Rotates the session's tokens. Never call twice at once for one session: the refresh
    /// token is single-use, and replaying it destroys the session.
    /// - Parameter sendBy: a nonce challenge's second attempt leaves only if it can be answered
    ///   (its whole deadline) by then: the end of the refresh lease, less a margin.
    public func refresh(refreshToken: String, dpopKey: DPoPKey, did: String,
                        sendBy: ContinuousClock.Instant? = nil) async throws(OAuthClientError) -> OAuthTokenSet {
        let response = try await post(to: endpoints.token, dpopKey: dpopKey, nonceScope: did, sendBy: sendBy) {
            now throws(ClientAssertionError) in
            try OAuthRequests.refreshForm(refreshToken: refreshToken, client: client, issuer: endpoints.issuer, now: now)
        }
        return try tokens(from: response, expectedDID: did)
    }

    /// Revokes one token. Returns quietly when the server has no revocation endpoint.
    public func revoke(token: String, hint: OAuthRequests.TokenTypeHint, dpopKey: DPoPKey, nonceScope: String)
        async throws(OAuthClientError)
    {
        guard let endpoint = endpoints.revocation else { return }
        let response = try await post(to: endpoint, dpopKey: dpopKey, nonceScope: nonceScope) { now throws(ClientAssertionError) in
            try OAuthRequests.revocationForm(token: token, tokenTypeHint: hint, client: client, issuer: endpoints.issuer, now: now)
        }
        // RFC 7009 §2.2: 200 whether or not the token was valid.
        guard response.status == 200 else { throw Self.failure(response, endpoint: "revocation") }
    }

    // MARK: -

    private func tokens(from response: InboundResponse, expectedDID: String?) throws(OAuthClientError) -> OAuthTokenSet {
        guard response.status == 200 else { throw Self.failure(response, endpoint: "token") }
        do {
            return try OAuthTokenSet(responseBody: response.body, expectedDID: expectedDID, receivedAt: now())
        } catch {
            throw .invalidTokenResponse(error)
        }
    }

    private static func failure(_ response: InboundResponse, endpoint: String) -> OAuthClientError {
        if var error = OAuthErrorResponse(status: response.status, body: response.body) {
            error.retryAfter = response.serverAskedWait()
            return .server(error)
        }
        return .unexpectedResponse(status: response.status, endpoint: endpoint, retryAfter: response.serverAskedWait())
    }

    /// POSTs the form `makeForm` builds (called per attempt, so assertions are fresh) with a
    /// DPoP proof, retrying once on a nonce challenge that brought a new nonce.
    private func post(to url: URL, dpopKey: DPoPKey, nonceScope: String, sendBy: ContinuousClock.Instant? = nil,
                      makeForm: (Date) throws(ClientAssertionError) -> FormBody) async throws(OAuthClientError) -> InboundResponse
    {
        let request: DPoPRequest
        do {
            request = try DPoPRequest.authorizationServer(method: "POST", url: url.absoluteString)
        } catch {
            throw .proof(error)
        }
        let exchange = DPoPExchange(request: request, signer: DPoPSigner(key: dpopKey, now: now), nonces: nonces,
                                    clockSkew: clockSkew, scope: nonceScope, now: now)
        let mayRetry = { [timeout] in sendBy.map { ContinuousClock.now + timeout <= $0 } ?? true }
        return try await exchange.run(proofFailed: OAuthClientError.proof, mayRetry: mayRetry) { proof throws(OAuthClientError) in
            let form: FormBody
            do throws(ClientAssertionError) {
                form = try makeForm(now().addingTimeInterval(clockSkew.offset))
            } catch {
                throw .clientAssertion(error)
            }
            let outbound = OutboundRequest(method: "POST", url: url, headers: [
                ("Content-Type", FormBody.contentType), ("Accept", "application/json"), ("DPoP", proof),
            ], body: Array(form.encoded.utf8))
            do throws(HTTPError) {
                return try await http.send(outbound, timeout: timeout)
            } catch {
                throw .transport(error)
            }
        }
    }
}
