import ATOAuth
import ATTestbed
import DPoP
import Foundation
import Testing

/// The record of what reached the authorization server's POST endpoints, which end-to-end tests
/// hand to an independent proof verifier.
@Suite("Testbed OAuth request log")
struct OAuthRequestLogTests {
    @Test("PAR, code exchange, refresh and revocation are recorded in order, with proof, target, answer and time")
    func recordsEveryEndpoint() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "alice"))
            let login = try await fixture.login(account)
            _ = try await fixture.refresh(login)
            try await fixture.server(login.endpoints).revoke(token: login.tokens.accessToken, hint: .accessToken,
                                                             dpopKey: login.key, nonceScope: account.did)
            let issuer = fixture.testbed.oauthIssuer
            let log = fixture.testbed.authorizationServerRequests
            let summary = log.map { "\($0.endpoint.rawValue) \($0.grantType ?? $0.tokenTypeHint ?? "-") \($0.status ?? 0) \($0.error ?? "-")" }
            // The first PAR has no nonce yet: challenged once, then accepted; later calls reuse the nonce.
            #expect(summary == [
                "pushedAuthorization - 400 use_dpop_nonce", "pushedAuthorization - 201 -",
                "token authorization_code 200 -", "token refresh_token 200 -", "revocation access_token 200 -",
            ])
            for request in log {
                #expect(request.issuer == issuer && request.method == "POST")
                #expect(request.url == issuer + (request.endpoint == .pushedAuthorization ? "/oauth/par"
                    : request.endpoint == .token ? "/oauth/token" : "/oauth/revoke"))
                #expect(request.proof?.split(separator: ".").count == 3, "the DPoP header as sent")
                #expect(abs(request.receivedAt.timeIntervalSince(fixture.testbed.now)) < 30)
            }
            #expect(log.filter(\.succeeded).count == 4)

            fixture.testbed.resetOAuth()
            #expect(fixture.testbed.authorizationServerRequests.isEmpty, "resetOAuth forgets them")
        }
    }

    @Test("injected failures are recorded with their status, and consumed failures are counted down")
    func injectedFailures() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "bob"))
            let login = try await fixture.login(account)
            fixture.testbed.injectOAuthFailures(endpoint: .token, status: 429, count: 2, retryAfterSeconds: 3)
            #expect(fixture.testbed.pendingOAuthFailures(endpoint: .token) == 2)
            await #expect(throws: OAuthClientError.self) { try await fixture.refresh(login) }
            #expect(fixture.testbed.pendingOAuthFailures(endpoint: .token) == 1)
            let last = try #require(fixture.testbed.authorizationServerRequests.last)
            #expect(last.status == 429 && last.error == "rate_limit_exceeded" && !last.succeeded)
            #expect(last.grantType == "refresh_token")
        }
    }

    @Test("the log keeps only the latest 256 requests")
    func bounded() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "carol"))
            let login = try await fixture.login(account)
            let server = fixture.server(login.endpoints)
            // Revoking an unknown token is answered 200 and changes nothing: a cheap request to repeat.
            for _ in 0..<260 {
                try await server.revoke(token: "unknown", hint: .accessToken, dpopKey: login.key, nonceScope: account.did)
            }
            let log = fixture.testbed.authorizationServerRequests
            #expect(log.count == 256)
            #expect(log.allSatisfy { $0.endpoint == .revocation }, "the login's requests were the oldest, and went first")
        }
    }
}
