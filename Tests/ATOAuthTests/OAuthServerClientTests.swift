import ATOAuth
import BlueskyHTTP
import DPoP
import Foundation
import Testing

@Suite("Authorization server client against a strict fake")
struct OAuthServerClientTests {
    let loopback = try! LoopbackClient(port: 8080)

    func makeClient(_ server: FakeAuthorizationServer, nonces: DPoPNonceCache = DPoPNonceCache(),
                    skew: ClockSkewEstimator = ClockSkewEstimator()) -> OAuthServerClient {
        OAuthServerClient(endpoints: FakeAuthorizationServer.endpoints, client: .none(clientID: loopback.clientID),
                          http: server, nonces: nonces, clockSkew: skew, timeout: .seconds(5))
    }

    /// PAR, approval and code exchange; returns the tokens and the session's key.
    func login(_ server: FakeAuthorizationServer, _ client: OAuthServerClient) async throws -> (OAuthTokenSet, DPoPKey) {
        let key = DPoPKey.generate()
        let pkce = PKCE.generate()
        let state = SecureRandom.state()
        let request = AuthorizationRequest(clientID: loopback.clientID, redirectURI: loopback.redirectURI,
                                           scope: loopback.scope, state: state, pkce: pkce, loginHint: "alice.example.com")
        let pushed = try await client.pushAuthorization(request, dpopKey: key, nonceScope: "alice.example.com")
        let code = try #require(server.approve(requestURI: pushed.requestURI))
        let pending = PendingAuthorization(state: state, issuer: FakeAuthorizationServer.issuer, pkce: pkce,
                                           redirectURI: loopback.redirectURI, dpopKey: key)
        let tokens = try await client.exchangeCode(code, for: pending, nonceScope: "alice.example.com")
        return (tokens, key)
    }

    @Test("the first request pays one nonce challenge; the cached nonce serves the next")
    func nonceRetryThenCache() async throws {
        let server = FakeAuthorizationServer()
        let nonces = DPoPNonceCache()
        let (tokens, _) = try await login(server, makeClient(server, nonces: nonces))
        #expect(tokens.did.string == server.did)
        #expect(server.log.map(\.path) == ["/oauth/par", "/oauth/par", "/oauth/token"])
        #expect(server.log.map(\.status) == [400, 201, 200])
        #expect(server.log.map(\.nonce) == [nil, "nonce-1", "nonce-1"])
        #expect(nonces.nonce(account: "alice.example.com", origin: FakeAuthorizationServer.issuer) == "nonce-1")
    }

    @Test("a nonce rotated by a successful response is saved, so the next call needs no retry")
    func nonceFromSuccess() async throws {
        let server = FakeAuthorizationServer()
        let nonces = DPoPNonceCache()
        let client = makeClient(server, nonces: nonces)
        let (tokens, key) = try await login(server, client)
        // The server moves on but still accepts the previous nonce: the success carries the new one.
        server.rotateNonce(keepingPrevious: true)
        let refreshed = try await client.refresh(refreshToken: tokens.refreshToken, dpopKey: key, did: server.did)
        #expect(nonces.nonce(account: server.did, origin: FakeAuthorizationServer.issuer) == server.currentNonce)
        // Now the old nonce is dropped; the saved new one still works without a challenge.
        server.rotateNonce(keepingPrevious: true)
        server.rotateNonce(keepingPrevious: false)
        nonces.update(account: server.did, origin: FakeAuthorizationServer.issuer, nonce: server.currentNonce)
        let before = server.log.count
        _ = try await client.refresh(refreshToken: refreshed.refreshToken, dpopKey: key, did: server.did)
        #expect(server.log.count == before + 1)
    }

    @Test("a stale nonce gets exactly one retry, with the new nonce")
    func staleNonce() async throws {
        let server = FakeAuthorizationServer()
        let client = makeClient(server)
        let (tokens, key) = try await login(server, client)
        server.rotateNonce(keepingPrevious: false)
        let before = server.log.count
        _ = try await client.refresh(refreshToken: tokens.refreshToken, dpopKey: key, did: server.did)
        #expect(server.log.dropFirst(before).map(\.status) == [400, 200])
        #expect(server.log.last?.nonce == server.currentNonce)
    }

    @Test("a server that challenges every time is retried once, then its error is reported")
    func retryOnlyOnce() async throws {
        let server = FakeAuthorizationServer()
        server.refusesEveryNonce = true
        let client = makeClient(server)
        let request = AuthorizationRequest(clientID: loopback.clientID, redirectURI: loopback.redirectURI, scope: "atproto",
                                           state: "s", pkce: .generate())
        await #expect(throws: OAuthClientError.server(OAuthErrorResponse(
            status: 400, error: "use_dpop_nonce", errorDescription: "Authorization server requires nonce in DPoP proof"))) {
            try await client.pushAuthorization(request, dpopKey: .generate(), nonceScope: "x")
        }
        #expect(server.log.count == 2)
    }

    @Test("a challenge without a new nonce is not retried")
    func noNonceNoRetry() async throws {
        let server = FakeAuthorizationServer()
        server.sendsNonceHeader = false
        let request = AuthorizationRequest(clientID: loopback.clientID, redirectURI: loopback.redirectURI, scope: "atproto",
                                           state: "s", pkce: .generate())
        await #expect(throws: OAuthClientError.self) {
            try await makeClient(server).pushAuthorization(request, dpopKey: .generate(), nonceScope: "x")
        }
        #expect(server.log.count == 1)
    }

    @Test("a replayed refresh token is invalid_grant with its reason, and the session is gone")
    func replayedRefresh() async throws {
        let server = FakeAuthorizationServer()
        let client = makeClient(server)
        let (tokens, key) = try await login(server, client)
        let rotated = try await client.refresh(refreshToken: tokens.refreshToken, dpopKey: key, did: server.did)
        do {
            _ = try await client.refresh(refreshToken: tokens.refreshToken, dpopKey: key, did: server.did)
            Issue.record("the replayed refresh token was accepted")
        } catch {
            #expect(error.isInvalidGrant)
            #expect(error == .server(OAuthErrorResponse(status: 400, error: "invalid_grant", errorDescription: "Refresh token replayed")))
        }
        await #expect(throws: OAuthClientError.self) {
            try await client.refresh(refreshToken: rotated.refreshToken, dpopKey: key, did: server.did)
        }
    }

    @Test("the token exchange must use the PAR key: another key is refused by the server")
    func keyBinding() async throws {
        let server = FakeAuthorizationServer()
        let client = makeClient(server)
        let pkce = PKCE.generate()
        let request = AuthorizationRequest(clientID: loopback.clientID, redirectURI: loopback.redirectURI, scope: "atproto",
                                           state: "s", pkce: pkce)
        let pushed = try await client.pushAuthorization(request, dpopKey: .generate(), nonceScope: "x")
        let code = try #require(server.approve(requestURI: pushed.requestURI))
        let wrongKey = PendingAuthorization(state: "s", issuer: FakeAuthorizationServer.issuer, pkce: pkce,
                                            redirectURI: loopback.redirectURI, dpopKey: .generate())
        await #expect(throws: OAuthClientError.server(OAuthErrorResponse(
            status: 400, error: "invalid_dpop_proof", errorDescription: "Invalid DPoP key binding"))) {
            try await client.exchangeCode(code, for: wrongKey, nonceScope: "x")
        }
    }

    @Test("a server clock two minutes ahead: the refused proof is signed again once with the Date header's time")
    func clockSkew() async throws {
        let server = FakeAuthorizationServer(skew: 120)
        let skew = ClockSkewEstimator()
        let client = makeClient(server, skew: skew)
        let request = AuthorizationRequest(clientID: loopback.clientID, redirectURI: loopback.redirectURI, scope: "atproto",
                                           state: "s", pkce: .generate())
        _ = try await client.pushAuthorization(request, dpopKey: .generate(), nonceScope: "x")
        #expect(abs(skew.offset - 120) <= 1.5)
        let refused = server.log.filter { $0.path == "/oauth/par" }.count
        _ = try await client.pushAuthorization(request, dpopKey: .generate(), nonceScope: "x")
        #expect(server.log.filter { $0.path == "/oauth/par" }.count == refused + 1, "the corrected clock is used at once")
    }

    @Test("revocation posts the token with a proof; no proof to the authorization server carries ath")
    func revocation() async throws {
        let server = FakeAuthorizationServer()
        let client = makeClient(server)
        let (tokens, key) = try await login(server, client)
        try await client.revoke(token: tokens.refreshToken, hint: .refreshToken, dpopKey: key, nonceScope: "alice.example.com")
        #expect(server.log.last?.path == "/oauth/revoke")
        #expect(server.log.last?.fields == ["token", "token_type_hint", "client_id"])
        // The fake's verifier refuses `ath` when no access token is presented: every request after
        // the first nonce challenge succeeding shows no proof carried one.
        #expect(server.log.map(\.status) == [400, 201, 200, 200])
    }

    @Test("a confidential client sends a fresh assertion on each attempt")
    func confidential() async throws {
        let server = FakeAuthorizationServer()
        let key = ClientSigningKey(keyID: "k1", privateKey: .init())
        let client = OAuthServerClient(endpoints: FakeAuthorizationServer.endpoints,
                                       client: .privateKeyJWT(clientID: "https://app.example.com/c.json", key: key),
                                       http: server, nonces: DPoPNonceCache(), clockSkew: ClockSkewEstimator(),
                                       timeout: .seconds(5))
        let request = AuthorizationRequest(clientID: "https://app.example.com/c.json", redirectURI: "https://app.example.com/cb",
                                           scope: "atproto", state: "s", pkce: .generate())
        _ = try await client.pushAuthorization(request, dpopKey: .generate(), nonceScope: "x")
        #expect(server.log.map(\.status) == [400, 201])
        #expect(server.log.allSatisfy { $0.fields.contains("client_assertion") && $0.fields.contains("client_assertion_type") })
    }
}
