import ATOAuth
import ATTestbed
import BlueskyHTTP
import DPoP
import Foundation
import Testing

/// Each misbehaviour the authorization server can be switched into, observed by the client.
@Suite("Testbed OAuth misbehaviours")
struct OAuthMisbehaviourTests {
    @Test("Wrong iss in the redirect: the callback check refuses it")
    func wrongIssuer() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "alice"))
            let endpoints = try await fixture.discover()
            fixture.testbed.setOAuthMisbehaviour(.wrongIssuerInRedirect, enabled: true)
            let (_, requestURI) = try await fixture.push(account, endpoints: endpoints)
            let redirect = try await fixture.authorize(requestURI, endpoints: endpoints)
            #expect(throws: CallbackError.issuerMismatch(expected: fixture.testbed.oauthIssuer,
                                                         actual: fixture.testbed.rogueOAuthIssuer)) {
                try fixture.callback(redirect)
            }
            fixture.testbed.setOAuthMisbehaviour(.wrongIssuerInRedirect, enabled: false)
            _ = try await fixture.login(account)
        }
    }

    @Test("Wrong sub in the token answer: a client expecting the account refuses the tokens")
    func wrongSubject() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "bob"))
            let other = await fixture.testbed.createAccount(AccountSpec(name: "mallory"))
            let endpoints = try await fixture.discover()
            fixture.testbed.setOAuthMisbehaviour(.wrongSubjectInTokens, enabled: true)
            let (_, requestURI) = try await fixture.push(account, endpoints: endpoints, expectedDID: account.did)
            let (authorization, code) = try fixture.callback(try await fixture.authorize(requestURI, endpoints: endpoints))
            let error = await #expect(throws: OAuthClientError.self) {
                try await fixture.server(endpoints).exchangeCode(code, for: authorization, nonceScope: account.handle)
            }
            #expect(error == .invalidTokenResponse(.subjectMismatch(expected: account.did, actual: other.did)))
        }
    }

    @Test("A rogue issuer hands out tokens for an account it does not serve; the PDS names another issuer and refuses them")
    func rogueIssuer() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "carol"))
            let login = try await fixture.login(account, issuer: fixture.testbed.rogueOAuthIssuer)
            #expect(login.tokens.did.description == account.did)
            #expect(login.endpoints.issuer == fixture.testbed.rogueOAuthIssuer)
            // The issuer binding check a client must make: sub → PDS → its authorization server.
            let resource = try ProtectedResourceMetadata(
                response: try await fixture.get(fixture.testbed.protectedResourceMetadataURL),
                url: fixture.testbed.protectedResourceMetadataURL)
            #expect(try resource.validatedIssuer(pdsOrigin: fixture.testbed.pdsURL) != login.endpoints.issuer)
            let refused = try await fixture.getSession(login)
            #expect(refused.status == 401)
            #expect(refused.header("WWW-Authenticate")?.contains(#"error="invalid_token""#) == true)
        }
    }

    @Test("A new nonce on every response: consecutive answers differ, an older one is challenged")
    func nonceChurn() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "dave"))
            let login = try await fixture.login(account)
            #expect(try await fixture.getSession(login).status == 200)
            let before = fixture.testbed.oauthStats(did: account.did).pdsNonceChallenges
            fixture.testbed.setOAuthMisbehaviour(.newNonceOnEveryResponse, enabled: true)

            let first = try await fixture.getSession(login)
            let firstNonce = try #require(first.header("DPoP-Nonce"))
            let second = try await fixture.getSession(login)
            #expect(second.status == 200)
            #expect(second.header("DPoP-Nonce") != firstNonce)
            // The nonce of two answers ago is no longer accepted.
            fixture.nonces.update(account: account.did, origin: fixture.testbed.pdsURL, nonce: firstNonce)
            #expect(try await fixture.getSession(login).status == 200)
            #expect(fixture.testbed.oauthStats(did: account.did).pdsNonceChallenges > before + 1)
        }
    }

    @Test("A lost refresh response: the token rotated server-side, so retrying replays it and loses the session")
    func lostRefreshResponse() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "erin"))
            let login = try await fixture.login(account)
            fixture.testbed.loseRefreshResponses(count: 1)
            let lost = await #expect(throws: OAuthClientError.self) { try await fixture.refresh(login) }
            if case .transport = lost {} else { Issue.record("expected a transport failure, got \(String(describing: lost))") }
            #expect(fixture.testbed.oauthStats(did: account.did).lostRefreshResponses == 1)

            let retry = await #expect(throws: OAuthClientError.self) { try await fixture.refresh(login) }
            #expect(retry?.serverError?.errorDescription == "Refresh token replayed")
            let stats = fixture.testbed.oauthStats(did: account.did)
            #expect(stats.refreshes == 1)
            #expect(stats.sessionsDeletedByReplay == 1)
        }
    }

    @Test("5xx and 429 bursts on OAuth endpoints, then service resumes")
    func failureBursts() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "frank"))
            let login = try await fixture.login(account)
            fixture.testbed.injectOAuthFailures(endpoint: .token, status: 503, count: 2)
            for _ in 0..<2 {
                let error = await #expect(throws: OAuthClientError.self) { try await fixture.refresh(login) }
                #expect(error?.serverError?.status == 503)
                #expect(error?.serverError?.error == "server_error")
            }
            _ = try await fixture.refresh(login)

            fixture.testbed.injectOAuthFailures(endpoint: .pushedAuthorization, status: 429, count: 1, retryAfterSeconds: 7)
            let endpoints = try await fixture.discover()
            let limited = await #expect(throws: OAuthClientError.self) { try await fixture.push(account, endpoints: endpoints) }
            #expect(limited?.serverError?.status == 429)
            _ = try await fixture.push(account, endpoints: endpoints)
            #expect(fixture.testbed.oauthStats(did: account.did).refreshes == 1)
        }
    }
}
