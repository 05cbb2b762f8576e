import ATTestbed
import Crypto
import Foundation
import NIOHTTP1
import Testing
import WebBasics

/// The testbed's generic OAuth 2.0 server, driven as a public client drives one.
@Suite("Testbed: a generic OAuth 2.0 server (RFC 8414, RFC 7591, PKCE, iss, JWT access tokens, refresh tokens or none)")
struct GenericOAuthServerTests {
    static let redirect = "http://127.0.0.1:53682/callback"

    /// Registers a public client, authorizes, and exchanges the code: (client id, token answer, redirect).
    static func login(_ sso: TestHTTPSConnection) async throws -> (clientID: String, tokens: TestResponse, location: String) {
        let registered = try await sso.send(.post("/register", json: [
            "client_name": "blueskyd", "redirect_uris": [redirect], "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"]]))
        #expect(registered.status == 201, "\(registered.text)")
        let clientID = try #require(registered["client_id"])
        let verifier = Base64URL.encode((0..<32).map { _ in UInt8.random(in: 0...255) })
        let challenge = Base64URL.encode(SHA256.hash(data: Array(verifier.utf8)))
        let authorize = try await sso.send(.get("/authorize?response_type=code&client_id=\(clientID)&scope=openid+profile"
            + "&redirect_uri=\(PercentEncoding.form(redirect))&state=xyz&code_challenge=\(challenge)&code_challenge_method=S256"))
        #expect(authorize.status == 302, "\(authorize.text)")
        let location = try #require(authorize.headers.first(name: "Location"))
        let code = try #require(URLComponents(string: location)?.queryItems?.first { $0.name == "code" }?.value)
        let tokens = try await sso.send(MastodonInstanceTests.form("/token", [
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirect), ("client_id", clientID),
            ("code_verifier", verifier)]))
        return (clientID, tokens, location)
    }

    @Test("discovery at both paths, registration, a redirect carrying iss, a JWT access token, userinfo, rotating refresh, revocation")
    func wholeFlow() async throws {
        try await TestbedHarness.with { harness in
            let testbed = harness.testbed
            testbed.addGenericOAuthUser(subject: "u-1", username: "carol", name: "Carol")
            let sso = try await harness.connection(host: "sso.tb1.test")
            for path in ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"] {
                let metadata = try await sso.send(.get(path))
                #expect(metadata["issuer"] == testbed.genericOAuthURL, "\(path)")
                #expect(metadata["registration_endpoint"] == testbed.genericOAuthURL + "/register")
                #expect(metadata.json["authorization_response_iss_parameter_supported"] as? Bool == true)
            }
            let (clientID, tokens, location) = try await Self.login(sso)
            let items = URLComponents(string: location)?.queryItems ?? []
            #expect(items.first { $0.name == "iss" }?.value == testbed.genericOAuthURL, "RFC 9207")
            #expect(items.first { $0.name == "state" }?.value == "xyz")
            let access = try #require(tokens["access_token"]), refresh = try #require(tokens["refresh_token"])
            let parts = access.split(separator: ".")
            #expect(parts.count == 3)
            let claims = try #require(Base64URL.decode(parts[1]).flatMap { try? JSONSerialization.jsonObject(with: Data($0)) as? [String: Any] })
            #expect(claims["sub"] as? String == "u-1" && claims["client_id"] as? String == clientID)
            #expect((tokens.json["expires_in"] as? Int) == 86_400)
            let me = try await sso.send(.get("/userinfo", bearer: access))
            #expect(me["preferred_username"] == "carol" && me["name"] == "Carol", "\(me.text)")

            let refreshed = try await sso.send(MastodonInstanceTests.form("/token", [
                ("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", clientID)]))
            #expect(refreshed.status == 200 && refreshed["refresh_token"] != refresh)
            let replay = try await sso.send(MastodonInstanceTests.form("/token", [
                ("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", clientID)]))
            #expect(replay.errorName == "invalid_grant" && testbed.genericOAuthStats.refreshTokenReplays == 1)

            let newAccess = try #require(refreshed["access_token"])
            #expect(try await sso.send(MastodonInstanceTests.form("/revoke", [("token", newAccess)])).status == 200)
            let after = try await sso.send(.get("/userinfo", bearer: newAccess))
            #expect(after.status == 401 && after.headers.first(name: "WWW-Authenticate")?.contains("invalid_token") == true)
            #expect(testbed.genericOAuthStats.clientsRegistered == 1)
        }
    }

    @Test("a server that issues no refresh token: the answer has none; a confidential client is not registered")
    func noRefreshToken() async throws {
        try await TestbedHarness.with { harness in
            let testbed = harness.testbed
            testbed.addGenericOAuthUser(subject: "u-2", username: "dan", name: "Dan")
            testbed.configureGenericOAuth(accessTokenLifetime: .seconds(300), issuesRefreshTokens: false)
            let sso = try await harness.connection(host: "sso.tb1.test")
            let (_, tokens, _) = try await Self.login(sso)
            #expect(tokens.status == 200 && tokens["refresh_token"] == nil, "\(tokens.text)")
            #expect((tokens.json["expires_in"] as? Int) == 300)
            let confidential = try await sso.send(.post("/register", json: [
                "redirect_uris": [Self.redirect], "token_endpoint_auth_method": "client_secret_basic"]))
            #expect(confidential.status == 400 && confidential.errorName == "invalid_client_metadata")
        }
    }
}
