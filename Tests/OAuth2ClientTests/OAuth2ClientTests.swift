import ATOAuth
import ATTestbed
import BlueskyHTTP
import BlueskyTesting
import Foundation
import JSONRPC
@testable import OAuth2Client
import Testing

/// The OAuth 2.0 client against the testbed's Mastodon-compatible instance and its generic
/// server, over HTTPS with the testbed's CA, inside the hermetic network.
@Suite("OAuth 2.0 accounts: discovery, registration, authorization code, tokens, revocation", .serialized)
struct OAuth2ClientTests {
    static let redirect = "http://127.0.0.1:53682/callback"

    struct Fixture {
        let testbed: Testbed
        let http: OutboundHTTP
        let directory: String

        static func with(_ body: (Fixture) async throws -> Void) async throws {
            try HermeticNetwork.require()
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("oauth2-\(UUID().uuidString.prefix(8))").path
            let testbed = try await Testbed.startInHermeticNetwork(directory: directory)
            let fixture = Fixture(testbed: testbed, http: try OutboundHTTP(.init(extraCAFile: testbed.caFile)), directory: directory)
            try await withTearDown {
                try? await fixture.http.shutdown()
                try? await testbed.shutdown()
                try? FileManager.default.removeItem(atPath: directory)
            } run: { try await body(fixture) }
        }

        /// What a browser does with the authorization URL: the testbed approves at once and
        /// redirects; the redirect's URL.
        func approve(_ url: URL) async throws -> String {
            let answer = try await http.send(OutboundRequest(url: url), timeout: .seconds(10))
            try #require(answer.status == 302, "\(String(decoding: answer.body, as: UTF8.self))")
            return try #require(answer.header("Location"))
        }
    }

    @Test("a Mastodon-compatible instance: RFC 8414 discovery, app registration, PKCE login, verify_credentials, rotating refresh, revocation")
    func mastodon() async throws {
        try await Fixture.with { fixture in
            let testbed = fixture.testbed
            testbed.addMastodonUser(username: "alice", displayName: "Alice")
            let metadata = try await ProviderDiscovery(http: fixture.http, timeout: .seconds(10)).discover(issuer: testbed.mastodonURL)
            #expect(metadata.appRegistrationEndpoint?.absoluteString == testbed.mastodonURL + "/api/v1/apps")
            #expect(metadata.registrationEndpoint == nil && !metadata.issuesIssInRedirect)
            let client = try await ClientRegistration(http: fixture.http, timeout: .seconds(10))
                .register(at: metadata, clientName: "blueskyd", redirectURI: Self.redirect, scope: "read write profile")
            #expect(client.clientSecret != nil, "Mastodon's apps are confidential clients")
            #expect(!client.description.contains(client.clientSecret ?? "-"), "the secret is never printed")

            let login = AuthorizationCode(metadata: metadata, client: client, redirectURI: Self.redirect, scope: "read profile")
            let code = try login.code(fromRedirect: try await fixture.approve(login.authorizationURL))
            let tokens = OAuth2TokenClient(metadata: metadata, client: client, http: fixture.http, timeout: .seconds(10))
            let first = try await tokens.exchange(code: code, verifier: login.pkce.verifier, redirectURI: Self.redirect)
            #expect(first.refreshToken != nil && first.scope == "read profile")
            #expect(!first.description.contains(first.accessToken))
            let me = try await fixture.http.send(OutboundRequest(url: URL(string: testbed.mastodonURL + "/api/v1/accounts/verify_credentials")!,
                                                                 headers: [("Authorization", "Bearer " + first.accessToken)]), timeout: .seconds(10))
            #expect(me.status == 200 && String(decoding: me.body, as: UTF8.self).contains("\"alice\""))

            let second = try await tokens.refresh(try #require(first.refreshToken))
            #expect(second.refreshToken != first.refreshToken)
            let replay = await #expect(throws: OAuth2ClientError.self) { try await tokens.refresh(try #require(first.refreshToken)) }
            #expect(replay?.endsSession == true, "invalid_grant is the verdict that ends a session")
            #expect(testbed.mastodonStats.grants.refreshTokenReplays == 1)
            #expect(try await tokens.revoke(second.accessToken))
            #expect(testbed.mastodonLiveGrants == 0)
        }
    }

    @Test("a generic server: RFC 8414 discovery, RFC 7591 registration of a public client, iss checked, no refresh token when none is issued")
    func generic() async throws {
        try await Fixture.with { fixture in
            let testbed = fixture.testbed
            testbed.addGenericOAuthUser(subject: "u-1", username: "carol", name: "Carol")
            testbed.configureGenericOAuth(issuesRefreshTokens: false)
            let metadata = try await ProviderDiscovery(http: fixture.http, timeout: .seconds(10)).discover(issuer: testbed.genericOAuthURL)
            #expect(metadata.issuesIssInRedirect && metadata.registrationEndpoint != nil)
            let client = try await ClientRegistration(http: fixture.http, timeout: .seconds(10))
                .register(at: metadata, clientName: "blueskyd", redirectURI: Self.redirect, scope: "openid profile")
            #expect(client.clientSecret == nil, "a public client")
            let login = AuthorizationCode(metadata: metadata, client: client, redirectURI: Self.redirect, scope: "openid profile")
            let redirect = try await fixture.approve(login.authorizationURL)
            // The same redirect claiming another issuer, or without one, is refused.
            let forged = redirect.replacingOccurrences(of: "iss=", with: "iss=https%3A%2F%2Fevil.example&was=")
            #expect(throws: AuthorizationCallbackError.issuerMismatch(expected: testbed.genericOAuthURL, actual: "https://evil.example")) {
                try login.code(fromRedirect: forged)
            }
            #expect(throws: AuthorizationCallbackError.stateMismatch) {
                try login.code(fromRedirect: redirect.replacingOccurrences(of: "state=", with: "state=x"))
            }
            let tokens = try await OAuth2TokenClient(metadata: metadata, client: client, http: fixture.http, timeout: .seconds(10))
                .exchange(code: try login.code(fromRedirect: redirect), verifier: login.pkce.verifier, redirectURI: Self.redirect)
            #expect(tokens.refreshToken == nil && tokens.accessExpiresAt != nil)
            #expect(testbed.genericOAuthStats.clientsRegistered == 1)
        }
    }

    @Test("no verdict is no verdict: a 429 with Retry-After and a 503 page are `unavailable`, never the end of a session")
    func unavailable() async throws {
        try await Fixture.with { fixture in
            let testbed = fixture.testbed
            let metadata = try await ProviderDiscovery(http: fixture.http, timeout: .seconds(10)).discover(issuer: testbed.genericOAuthURL)
            let client = RegisteredClient(clientID: "cli-unknown")
            let tokens = OAuth2TokenClient(metadata: metadata, client: client, http: fixture.http, timeout: .seconds(10))
            testbed.injectFailures(nsid: GenericOAuthEndpoint.token.failureKey, status: 429, count: 1, retryAfterSeconds: 7)
            let limited = await #expect(throws: OAuth2ClientError.self) { try await tokens.refresh("r") }
            #expect(limited == .unavailable("sso.\(testbed.configuration.domain) answered HTTP 429", retryAfter: 7))
            #expect(limited?.endsSession == false)
            testbed.injectFailures(nsid: GenericOAuthEndpoint.token.failureKey, status: 503, count: 1, html: true)
            let down = await #expect(throws: OAuth2ClientError.self) { try await tokens.refresh("r") }
            #expect(down?.endsSession == false)
            if case .unavailable = down {} else { Issue.record("\(String(describing: down))") }
            // A host that publishes no metadata at either path.
            let none = await #expect(throws: OAuth2ClientError.self) {
                try await ProviderDiscovery(http: fixture.http, timeout: .seconds(10)).discover(issuer: testbed.pdsURL)
            }
            #expect(none?.description.contains("publishes no OAuth metadata") == true, "\(String(describing: none))")
        }
    }

    @Test("metadata naming another issuer, lacking PKCE S256, or with an http endpoint is refused")
    func metadataRules() throws {
        let good: JSONValue = ["issuer": "https://id.example", "authorization_endpoint": "https://id.example/a", "token_endpoint": "https://id.example/t"]
        #expect(try ProviderMetadata(document: good, expectedIssuer: "https://id.example/", allowInsecureLoopback: false).issuer == "https://id.example")
        #expect(throws: OAuth2ClientError.invalidAnswer("the metadata names the issuer https://id.example, not https://other.example")) {
            try ProviderMetadata(document: good, expectedIssuer: "https://other.example", allowInsecureLoopback: false)
        }
        let plain: JSONValue = ["issuer": "https://id.example", "authorization_endpoint": "http://id.example/a", "token_endpoint": "https://id.example/t"]
        #expect(throws: OAuth2ClientError.insecureURL("http://id.example/a")) {
            try ProviderMetadata(document: plain, expectedIssuer: "https://id.example", allowInsecureLoopback: true)
        }
        let noPKCE: JSONValue = ["issuer": "https://id.example", "authorization_endpoint": "https://id.example/a",
                                 "token_endpoint": "https://id.example/t", "code_challenge_methods_supported": ["plain"]]
        #expect(throws: OAuth2ClientError.invalidAnswer("the server does not support PKCE with S256")) {
            try ProviderMetadata(document: noPKCE, expectedIssuer: "https://id.example", allowInsecureLoopback: false)
        }
    }

    @Test("mix-up: metadata naming endpoints on another origin (another server's token, sent here) is refused, each endpoint that is contacted")
    func mixUp() throws {
        for name in ["authorization_endpoint", "token_endpoint", "revocation_endpoint", "registration_endpoint",
                     "app_registration_endpoint", "userinfo_endpoint"] {
            var fields: [String: JSONValue] = ["issuer": "https://a.example/", "authorization_endpoint": "https://a.example/oauth/authorize",
                                               "token_endpoint": "https://a.example/oauth/token"]
            fields[name] = "https://mastodon.social/oauth/x"
            #expect(throws: OAuth2ClientError.self, "\(name)") {
                try ProviderMetadata(document: .object(fields), expectedIssuer: "https://a.example", allowInsecureLoopback: false)
            }
            // Another port of the same host is another origin too.
            fields[name] = "https://a.example:8443/oauth/x"
            #expect(throws: OAuth2ClientError.self, "\(name) on another port") {
                try ProviderMetadata(document: .object(fields), expectedIssuer: "https://a.example", allowInsecureLoopback: false)
            }
        }
        // The issuer's origin however written: case and the default port are no difference.
        let same: JSONValue = ["issuer": "https://A.example", "authorization_endpoint": "https://a.example:443/a",
                               "token_endpoint": "https://a.EXAMPLE/t"]
        #expect(throws: Never.self) { try ProviderMetadata(document: same, expectedIssuer: "https://A.example", allowInsecureLoopback: false) }
    }

    @Test("RFC 8414 puts the well-known segment before the issuer's path; OpenID discovery after it")
    func metadataPaths() throws {
        let urls = ProviderDiscovery.metadataURLs(of: try #require(URL(string: "https://id.example:8443/tenant/")))
        #expect(urls.map(\.absoluteString) == [
            "https://id.example:8443/.well-known/oauth-authorization-server/tenant",
            "https://id.example:8443/tenant/.well-known/openid-configuration",
        ])
        #expect(ProviderDiscovery.metadataURLs(of: try #require(URL(string: "https://social.example"))).map(\.absoluteString) == [
            "https://social.example/.well-known/oauth-authorization-server", "https://social.example/.well-known/openid-configuration",
        ])
    }
}
