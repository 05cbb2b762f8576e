import ATTestbed
import Crypto
import Foundation
import NIOHTTP1
import Testing
import WebBasics

/// The testbed's Mastodon-compatible instance, driven as a Mastodon client drives one.
@Suite("Testbed: a Mastodon-compatible instance (apps, authorization code with PKCE, rotating refresh tokens, revocation)")
struct MastodonInstanceTests {
    static let redirect = "http://127.0.0.1:53682/callback"

    static func form(_ uri: String, _ fields: [(String, String)]) -> TestRequest {
        let body = fields.map { "\($0.0)=\(PercentEncoding.form($0.1))" }.joined(separator: "&")
        return TestRequest(.POST, uri, headers: ["Content-Type": "application/x-www-form-urlencoded"], body: Array(body.utf8))
    }

    /// Registers an app, authorizes, and exchanges the code: (client id, secret, token answer).
    static func login(_ social: TestHTTPSConnection, scopes: String = "read write profile") async throws
        -> (clientID: String, secret: String, tokens: TestResponse) {
        let app = try await social.send(.post("/api/v1/apps", json: ["client_name": "blueskyd", "redirect_uris": redirect,
                                                                      "scopes": scopes, "website": "https://example.com"]))
        try #require(app.status == 200, "\(app.text)")
        let (clientID, secret) = (try #require(app["client_id"]), try #require(app["client_secret"]))
        let verifier = Base64URL.encode((0..<32).map { _ in UInt8.random(in: 0...255) })
        let challenge = Base64URL.encode(SHA256.hash(data: Array(verifier.utf8)))
        let authorize = try await social.send(.get("/oauth/authorize?response_type=code&client_id=\(clientID)"
            + "&redirect_uri=\(PercentEncoding.form(redirect))&scope=read+profile&state=s1&code_challenge=\(challenge)&code_challenge_method=S256"))
        #expect(authorize.status == 302, "\(authorize.text)")
        let location = try #require(authorize.headers.first(name: "Location"))
        let query = try #require(URLComponents(string: location)?.queryItems)
        #expect(location.hasPrefix(redirect + "?"))
        #expect(query.first { $0.name == "state" }?.value == "s1")
        let code = try #require(query.first { $0.name == "code" }?.value)
        let tokens = try await social.send(form("/oauth/token", [
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirect), ("client_id", clientID),
            ("client_secret", secret), ("code_verifier", verifier)]))
        return (clientID, secret, tokens)
    }

    @Test("register, authorize with PKCE, verify_credentials; refresh rotates and a replay is refused; revocation ends the grant")
    func wholeFlow() async throws {
        try await TestbedHarness.with { harness in
            let testbed = harness.testbed
            testbed.addMastodonUser(username: "alice", displayName: "Alice")
            let social = try await harness.connection(host: "social.tb1.test")
            let metadata = try await social.send(.get("/.well-known/oauth-authorization-server"))
            #expect(metadata["issuer"] == testbed.mastodonURL + "/", "as Mastodon 4.3 writes it")
            #expect(metadata["app_registration_endpoint"] == testbed.mastodonURL + "/api/v1/apps")

            let (clientID, secret, tokens) = try await Self.login(social)
            #expect(tokens.status == 200, "\(tokens.text)")
            #expect(tokens["token_type"] == "Bearer" && tokens["scope"] == "read profile")
            #expect((tokens.json["expires_in"] as? Int) == 7200)
            let access = try #require(tokens["access_token"]), refresh = try #require(tokens["refresh_token"])
            let me = try await social.send(.get("/api/v1/accounts/verify_credentials", bearer: access))
            #expect(me["username"] == "alice" && me["display_name"] == "Alice", "\(me.text)")

            let refreshed = try await social.send(Self.form("/oauth/token", [
                ("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", clientID), ("client_secret", secret)]))
            #expect(refreshed.status == 200 && refreshed["refresh_token"] != refresh, "\(refreshed.text)")
            let replay = try await social.send(Self.form("/oauth/token", [
                ("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", clientID), ("client_secret", secret)]))
            #expect(replay.status == 400 && replay.errorName == "invalid_grant")
            #expect(testbed.mastodonStats.grants.refreshTokenReplays == 1 && testbed.mastodonStats.grants.refreshes == 1)

            let newAccess = try #require(refreshed["access_token"])
            let revoked = try await social.send(Self.form("/oauth/revoke", [
                ("token", newAccess), ("client_id", clientID), ("client_secret", secret)]))
            #expect(revoked.status == 200)
            #expect(testbed.mastodonLiveGrants == 0, "the refresh token went with its grant")
            let after = try await social.send(.get("/api/v1/accounts/verify_credentials", bearer: newAccess))
            #expect(after.status == 401 && after["error"] == "The access token is invalid")
        }
    }

    @Test("refusals as Mastodon words them: a wrong verifier, a wrong secret, an expired token; injected failures")
    func refusals() async throws {
        try await TestbedHarness.with { harness in
            let testbed = harness.testbed
            testbed.addMastodonUser(username: "bob", displayName: "Bob")
            let social = try await harness.connection(host: "social.tb1.test")
            testbed.setMastodonAccessTokenLifetime(.seconds(60))
            let (clientID, _, tokens) = try await Self.login(social)
            let access = try #require(tokens["access_token"]), refresh = try #require(tokens["refresh_token"])
            let wrongSecret = try await social.send(Self.form("/oauth/token", [
                ("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", clientID), ("client_secret", "nope")]))
            #expect(wrongSecret.status == 401 && wrongSecret.errorName == "invalid_client")
            testbed.advanceClock(by: .seconds(61))
            let expired = try await social.send(.get("/api/v1/accounts/verify_credentials", bearer: access))
            #expect(expired.status == 401 && expired["error"] == "The access token expired")

            testbed.injectFailures(nsid: MastodonEndpoint.token.failureKey, status: 429, count: 1, retryAfterSeconds: 3)
            let limited = try await social.send(Self.form("/oauth/token", [("grant_type", "refresh_token"), ("refresh_token", refresh)]))
            #expect(limited.status == 429 && limited.headers.first(name: "Retry-After") == "3")

            // A code exchanged with the wrong verifier is refused (and used up).
            let other = try await Self.loginWithWrongVerifier(social)
            #expect(other.status == 400 && other.errorName == "invalid_grant", "\(other.text)")
        }
    }

    static func loginWithWrongVerifier(_ social: TestHTTPSConnection) async throws -> TestResponse {
        let app = try await social.send(.post("/api/v1/apps", json: ["client_name": "x", "redirect_uris": redirect, "scopes": "read"]))
        let (clientID, secret) = (try #require(app["client_id"]), try #require(app["client_secret"]))
        let challenge = Base64URL.encode(SHA256.hash(data: Array("right".utf8)))
        let authorize = try await social.send(.get("/oauth/authorize?response_type=code&client_id=\(clientID)"
            + "&redirect_uri=\(PercentEncoding.form(redirect))&code_challenge=\(challenge)&code_challenge_method=S256"))
        let code = try #require(URLComponents(string: authorize.headers.first(name: "Location") ?? "")?.queryItems?.first { $0.name == "code" }?.value)
        return try await social.send(form("/oauth/token", [
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirect), ("client_id", clientID),
            ("client_secret", secret), ("code_verifier", "wrong")]))
    }
}

/// Form encoding for the tests' requests.
enum PercentEncoding {
    static func form(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn:
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")) ?? text
    }
}
