import ATOAuth
import ATTestbed
import BlueskyHTTP
import DPoP
import Foundation
import Testing

/// Refresh rotation, replay, revocation and expiry at the testbed's authorization server and PDS.
@Suite("Testbed OAuth tokens")
struct OAuthTokenTests {
    @Test("Refresh rotates; replaying the old refresh token deletes the whole session")
    func refreshRotationAndReplay() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "alice"))
            var login = try await fixture.login(account)
            let original = login.tokens
            login.tokens = try await fixture.refresh(login)
            #expect(login.tokens.refreshToken != original.refreshToken)
            #expect(login.tokens.accessToken != original.accessToken)
            #expect(try await fixture.getSession(login).status == 200)

            let replay = await #expect(throws: OAuthClientError.self) {
                try await fixture.refresh(login, refreshToken: original.refreshToken)
            }
            #expect(replay?.serverError?.error == "invalid_grant")
            #expect(replay?.serverError?.errorDescription == "Refresh token replayed")
            // The whole session is gone: its newest refresh token and its access token too.
            #expect(fixture.testbed.oauthSessionCount(did: account.did) == 0)
            let after = await #expect(throws: OAuthClientError.self) { try await fixture.refresh(login) }
            #expect(after?.serverError?.errorDescription == "Invalid refresh token")
            let refused = try await fixture.getSession(login)
            #expect(refused.status == 401)
            #expect(refused.header("WWW-Authenticate")?.contains(#"error="invalid_token""#) == true)

            let stats = fixture.testbed.oauthStats(did: account.did)
            #expect(stats.refreshes == 1)
            #expect(stats.refreshTokenReplays == 1)
            #expect(stats.sessionsDeletedByReplay == 1)
        }
    }

    @Test("Access tokens expire after expires_in (down to 1 s); the PDS answers invalid_token")
    func accessTokenExpiry() async throws {
        try await OAuthFixture.with({ $0.oauthAccessTokenLifetime = .seconds(1) }) { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "bob"))
            let login = try await fixture.login(account)
            #expect(login.tokens.expiresAt.timeIntervalSince(fixture.testbed.now) <= 1)
            fixture.testbed.advanceClock(by: .seconds(2))
            let refused = try await fixture.getSession(login)
            #expect(refused.status == 401)
            #expect(DPoPChallenge.classify(status: refused.status, wwwAuthenticate: refused.header("WWW-Authenticate"),
                                           body: refused.body) == .invalidToken(description: "Token expired"))
            #expect(fixture.testbed.oauthStats(did: account.did).invalidTokenRejections == 1)
        }
    }

    @Test("A public client's session ends 14 days after login, however often it refreshes")
    func sessionLifetime() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "carol"))
            var login = try await fixture.login(account)
            for _ in 0..<2 {
                fixture.testbed.advanceClock(by: .seconds(6 * 24 * 3600))
                login.tokens = try await fixture.refresh(login)
            }
            fixture.testbed.advanceClock(by: .seconds(2 * 24 * 3600 + 1))
            let error = await #expect(throws: OAuthClientError.self) { try await fixture.refresh(login) }
            #expect(error?.serverError?.error == "invalid_grant")
            #expect(error?.serverError?.errorDescription == "Session expired")
            #expect(fixture.testbed.oauthSessionCount(did: account.did) == 0)
        }
    }

    @Test("Revoking the refresh token ends the session: the PDS and the token endpoint refuse it")
    func revocation() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "dave"))
            let login = try await fixture.login(account)
            try await fixture.server(login.endpoints).revoke(
                token: login.tokens.refreshToken, hint: .refreshToken, dpopKey: login.key, nonceScope: account.did)
            #expect(fixture.testbed.oauthStats(did: account.did).revocations == 1)
            #expect(try await fixture.getSession(login).status == 401)
            let error = await #expect(throws: OAuthClientError.self) { try await fixture.refresh(login) }
            #expect(error?.serverError?.error == "invalid_grant")
            // Revoking again (or an unknown token) still answers 200 and counts nothing.
            try await fixture.server(login.endpoints).revoke(
                token: login.tokens.accessToken, hint: .accessToken, dpopKey: login.key, nonceScope: account.did)
            #expect(fixture.testbed.oauthStats(did: account.did).revocations == 1)
        }
    }

    @Test("Revoking the access token ends the session too")
    func accessTokenRevocation() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "erin"))
            let login = try await fixture.login(account)
            try await fixture.server(login.endpoints).revoke(
                token: login.tokens.accessToken, hint: .accessToken, dpopKey: login.key, nonceScope: account.did)
            #expect(fixture.testbed.oauthStats(did: account.did).revocations == 1)
            #expect(fixture.testbed.oauthSessionCount(did: account.did) == 0)
        }
    }

    @Test("An authorization code is single-use")
    func codeReuse() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "frank"))
            let endpoints = try await fixture.discover()
            let (_, requestURI) = try await fixture.push(account, endpoints: endpoints)
            let (authorization, code) = try fixture.callback(try await fixture.authorize(requestURI, endpoints: endpoints))
            _ = try await fixture.server(endpoints).exchangeCode(code, for: authorization, nonceScope: account.handle)
            let error = await #expect(throws: OAuthClientError.self) {
                try await fixture.server(endpoints).exchangeCode(code, for: authorization, nonceScope: account.handle)
            }
            #expect(error?.serverError?.errorDescription == "Code replayed")
            #expect(fixture.testbed.oauthStats(did: account.did).tokenExchanges == 1)
        }
    }

    @Test("A DPoP proof without ath, or with another key, is refused by the PDS")
    func pdsProofChecks() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "grace"))
            var login = try await fixture.login(account)
            let url = try #require(URL(string: fixture.testbed.pdsURL + "/xrpc/com.atproto.server.getSession"))
            // A proof made for the authorization server (no ath) sent to the PDS.
            _ = try await fixture.getSession(login)
            let nonce = fixture.nonces.nonce(account: account.did, origin: fixture.testbed.pdsURL)
            let proof = try DPoPSigner(key: login.key, now: fixture.clock)
                .proof(for: try .authorizationServer(method: "GET", url: url.absoluteString), nonce: nonce)
            let noATH = try await fixture.http.send(OutboundRequest(
                url: url, headers: [("Authorization", "DPoP " + login.tokens.accessToken), ("DPoP", proof)]))
            #expect(noATH.status == 401)

            // The token alone, as Bearer, is refused: it is bound to the key.
            let bearer = try await fixture.http.send(OutboundRequest(
                url: url, headers: [("Authorization", "Bearer " + login.tokens.accessToken)]))
            #expect(bearer.status == 400)
            #expect(bearer.errorBody.description == "DPoP-bound token used as a Bearer token")

            login = OAuthFixture.Login(endpoints: login.endpoints, client: login.client, key: .generate(), tokens: login.tokens)
            #expect(try await fixture.getSession(login).status == 401)
            let rejections = fixture.testbed.oauthStats(did: account.did).dpopRejections
            #expect(rejections["DPoP ath mismatch"] == 1)
            #expect(rejections["Invalid DPoP key binding"] == 1)
        }
    }
}
