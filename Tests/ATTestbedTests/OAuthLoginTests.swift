import ATOAuth
import ATTestbed
import BlueskyHTTP
import DPoP
import Foundation
import Testing

/// The authorization code flow against the testbed's authorization server, driven by the
/// ATOAuth client pieces over HTTPS, in the hermetic network.
@Suite("Testbed OAuth login")
struct OAuthLoginTests {
    @Test("Discovery: the PDS names auth.<domain>, whose metadata passes the atproto profile checks")
    func discovery() async throws {
        try await OAuthFixture.with { fixture in
            let endpoints = try await fixture.discover()
            #expect(endpoints.issuer == fixture.testbed.oauthIssuer)
            #expect(endpoints.issuer.hasPrefix("https://auth.tb"))
            #expect(endpoints.pushedAuthorizationRequest.absoluteString == fixture.testbed.oauthIssuer + "/oauth/par")
            #expect(endpoints.revocation?.absoluteString == fixture.testbed.oauthIssuer + "/oauth/revoke")
            let metadata = try await fixture.get(fixture.testbed.oauthIssuer + "/.well-known/oauth-authorization-server")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(metadata.body)) as? [String: Any])
            #expect(object["code_challenge_methods_supported"] as? [String] == ["S256"])
            #expect(object["token_endpoint_auth_methods_supported"] as? [String] == ["none", "private_key_jwt"])
            // The PDS under both its names (accounts move to the second one).
            #expect(object["protected_resources"] as? [String] == [fixture.testbed.pdsURL, fixture.testbed.pdsAliasURL])
        }
    }

    @Test("Full login: PAR, authorize redirect with code, state and iss, token exchange, then a PDS call")
    func fullLogin() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "alice"))
            let login = try await fixture.login(account)
            #expect(login.tokens.did.description == account.did)
            #expect(login.tokens.scope == fixture.loopback.scope)

            let session = try await fixture.getSession(login)
            #expect(session.status == 200)
            #expect(session.errorBody.error == nil)
            let body = try #require(try JSONSerialization.jsonObject(with: Data(session.body)) as? [String: Any])
            #expect(body["did"] as? String == account.did)

            let stats = fixture.testbed.oauthStats(did: account.did)
            #expect(stats.pushedAuthorizationRequests == 1)
            #expect(stats.authorizationsApproved == 1)
            #expect(stats.tokenExchanges == 1)
            #expect(stats.authenticatedResourceCalls == 1)
            #expect(fixture.testbed.oauthSessionCount(did: account.did) == 1)
            // The app-password counters are untouched by OAuth calls.
            #expect(fixture.testbed.stats(did: account.did).authenticatedCalls == 0)
        }
    }

    @Test("Nonces: one challenge per server, then the cached nonce is accepted, across a rotation too")
    func nonceChallengeThenCached() async throws {
        try await OAuthFixture.with({ $0.dpopNonceRotationPeriod = .seconds(60) }) { fixture in
            // Start just after a rotation: the steps below count periods, and the real clock
            // crossing one more boundary on a slow run would make the cached nonce two periods
            // old, not one (this failed once in a loaded `make test`).
            let intoPeriod = fixture.testbed.now.timeIntervalSince1970.truncatingRemainder(dividingBy: 60)
            fixture.testbed.advanceClock(by: .milliseconds(Int64((60 - intoPeriod) * 1000) + 100))
            let account = await fixture.testbed.createAccount(AccountSpec(name: "bob"))
            let login = try await fixture.login(account)
            for _ in 0..<3 { #expect(try await fixture.getSession(login).status == 200) }
            var stats = fixture.testbed.oauthStats(did: account.did)
            // PAR met the authorization server's challenge; the token request reused its nonce.
            #expect(stats.authorizationServerNonceChallenges == 1)
            #expect(stats.pdsNonceChallenges == 1)
            #expect(stats.authenticatedResourceCalls == 3)

            // One period later the cached nonce is the previous one: still accepted.
            let cached = try #require(fixture.nonces.nonce(account: account.did, origin: fixture.testbed.pdsURL))
            fixture.testbed.advanceClock(by: .seconds(61))
            fixture.nonces.update(account: account.did, origin: fixture.testbed.pdsURL, nonce: cached)
            #expect(try await fixture.getSession(login).status == 200)
            #expect(fixture.testbed.oauthStats(did: account.did).pdsNonceChallenges == 1)

            // Three periods later it is gone: one challenge, then the retry succeeds.
            fixture.testbed.advanceClock(by: .seconds(180))
            fixture.nonces.update(account: account.did, origin: fixture.testbed.pdsURL, nonce: cached)
            #expect(try await fixture.getSession(login).status == 200)
            stats = fixture.testbed.oauthStats(did: account.did)
            #expect(stats.pdsNonceChallenges == 2)
        }
    }

    @Test("The AS asks for a nonce with 400 use_dpop_nonce and a DPoP-Nonce header")
    func authorizationServerChallengeShape() async throws {
        try await OAuthFixture.with { fixture in
            let key = DPoPKey.generate()
            let url = try #require(URL(string: fixture.testbed.oauthIssuer + "/oauth/par"))
            let proof = try DPoPSigner(key: key, now: fixture.clock)
                .proof(for: try .authorizationServer(method: "POST", url: url.absoluteString), nonce: nil)
            let response = try await fixture.http.send(OutboundRequest(
                method: "POST", url: url,
                headers: [("Content-Type", FormBody.contentType), ("DPoP", proof)], body: Array("client_id=x".utf8)))
            #expect(response.status == 400)
            #expect(response.errorBody.error == "use_dpop_nonce")
            #expect(response.header("DPoP-Nonce")?.isEmpty == false)
            #expect(fixture.testbed.oauthTotals.authorizationServerNonceChallenges == 1)
        }
    }

    @Test("A token exchange signed with another key than the PAR's is refused")
    func wrongKeyRefused() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "carol"))
            let endpoints = try await fixture.discover()
            let (_, requestURI) = try await fixture.push(account, endpoints: endpoints, key: .generate())
            var (authorization, code) = try fixture.callback(try await fixture.authorize(requestURI, endpoints: endpoints))
            authorization.dpopKey = .generate()
            let error = await #expect(throws: OAuthClientError.self) {
                try await fixture.server(endpoints).exchangeCode(code, for: authorization, nonceScope: account.handle)
            }
            #expect(error?.serverError?.errorDescription == "Invalid DPoP key binding")
            let stats = fixture.testbed.oauthStats(did: account.did)
            #expect(stats.dpopRejections["Invalid DPoP key binding"] == 1)
            #expect(stats.tokenExchanges == 0)
        }
    }

    @Test("A request_uri expires 5 minutes after PAR, by the testbed clock")
    func pushedRequestExpiry() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "dave"))
            let endpoints = try await fixture.discover()

            let (_, fresh) = try await fixture.push(account, endpoints: endpoints)
            let (_, stale) = try await fixture.push(account, endpoints: endpoints)
            // The testbed clock runs on with real time too: 5 s of slack for a loaded machine.
            fixture.testbed.advanceClock(by: .seconds(295))
            #expect(try await fixture.authorize(fresh, endpoints: endpoints).status == 302)
            fixture.testbed.advanceClock(by: .seconds(6))
            let expired = try await fixture.authorize(stale, endpoints: endpoints)
            #expect(expired.status == 400)
            #expect(expired.errorBody.description == "This request has expired")
            // Used once, whatever the outcome.
            #expect(try await fixture.authorize(fresh, endpoints: endpoints).errorBody.description == "Unknown request_uri")
        }
    }

    @Test("PAR refuses a redirect_uri the loopback client does not declare")
    func foreignRedirectRefused() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "erin"))
            let endpoints = try await fixture.discover()
            let error = await #expect(throws: OAuthClientError.self) {
                try await fixture.push(account, endpoints: endpoints, redirectURI: "http://127.0.0.1:8123/elsewhere")
            }
            #expect(error?.serverError?.error == "invalid_request")
            #expect(fixture.testbed.oauthStats(did: account.did).pushedAuthorizationRequests == 0)
            // Another port on the declared path is the same redirect URI for a loopback client.
            _ = try await fixture.push(account, endpoints: endpoints, redirectURI: "http://127.0.0.1:9999/callback")
            #expect(fixture.testbed.oauthStats(did: account.did).pushedAuthorizationRequests == 1)
        }
    }
}
