import ATOAuth
import ATTestbed
import BlueskyHTTP
import BlueskyTesting
import DPoP
import Foundation
import Testing

/// A testbed in the hermetic network (real host names: `auth.tbN.test` must resolve) and the
/// ATOAuth client pieces set up as the daemon will use them: one HTTPS client trusting the
/// testbed CA, a nonce cache, a skew estimate, and the testbed's clock as the client's clock
/// (so proofs stay fresh when a test moves time forward).
final class OAuthFixture: Sendable {
    let testbed: Testbed
    let http: OutboundHTTP
    let nonces = DPoPNonceCache()
    let clockSkew = ClockSkewEstimator()
    let pending = PendingAuthorizations(lifetime: 30 * 24 * 3600)
    let loopback: LoopbackClient

    private init(testbed: Testbed, http: OutboundHTTP, loopback: LoopbackClient) {
        self.testbed = testbed
        self.http = http
        self.loopback = loopback
    }

    static func start(_ configure: (inout TestbedConfiguration) -> Void = { _ in }) async throws -> OAuthFixture {
        try HermeticNetwork.require()
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("oauth-\(UUID().uuidString.prefix(8))").path
        let testbed = try await Testbed.startInHermeticNetwork(directory: directory, configure: configure)
        let http = try OutboundHTTP(.init(extraCAFile: testbed.caFile))
        return OAuthFixture(testbed: testbed, http: http, loopback: try LoopbackClient(port: 8123))
    }

    /// A fixture started with `configure` for `body`, stopped (awaited) when `body` returns or throws.
    @discardableResult
    static func with<T>(_ configure: (inout TestbedConfiguration) -> Void = { _ in },
                        _ body: (OAuthFixture) async throws -> T) async throws -> T {
        let fixture = try await start(configure)
        return try await withTearDown { await fixture.stop() } run: { try await body(fixture) }
    }

    func stop() async {
        try? await http.shutdown()
        try? await testbed.shutdown()
        try? FileManager.default.removeItem(atPath: testbed.configuration.directory)
    }

    var clock: @Sendable () -> Date { { [testbed] in testbed.now } }

    func get(_ url: String) async throws -> InboundResponse {
        try await http.send(OutboundRequest(url: try #require(URL(string: url))))
    }

    /// PDS → protected resource → issuer → metadata, through ATOAuth's validators.
    func discover(issuer overriding: String? = nil) async throws -> AuthorizationServerEndpoints {
        let pds = testbed.pdsURL
        let resource = try ProtectedResourceMetadata(
            response: try await get(testbed.protectedResourceMetadataURL), url: testbed.protectedResourceMetadataURL)
        let issuer = try overriding ?? resource.validatedIssuer(pdsOrigin: pds)
        let metadataURL = issuer + "/.well-known/oauth-authorization-server"
        return try AuthorizationServerMetadata(response: try await get(metadataURL), url: metadataURL)
            .validated(expectedIssuer: issuer, pdsOrigin: pds)
    }

    /// Who logs in: the client's authentication, redirect URI and scope.
    struct TestClient: Sendable {
        var authentication: ClientAuthentication
        var redirectURI: String
        var scope: String

        var clientID: String { authentication.clientID }
    }

    /// The development client on port 8123, as the daemon's login will use it.
    var loopbackClient: TestClient {
        TestClient(authentication: .none(clientID: loopback.clientID), redirectURI: loopback.redirectURI,
                   scope: loopback.scope)
    }

    func server(_ endpoints: AuthorizationServerEndpoints, client: TestClient? = nil) -> OAuthServerClient {
        OAuthServerClient(endpoints: endpoints, client: (client ?? loopbackClient).authentication, http: http,
                          nonces: nonces, clockSkew: clockSkew, timeout: .seconds(30), now: clock)
    }

    var resource: DPoPResourceClient { DPoPResourceClient(http: http, nonces: nonces, clockSkew: clockSkew, now: clock) }

    /// PAR for `account` (by handle); the pending login is remembered for the callback.
    func push(_ account: TestAccount, endpoints: AuthorizationServerEndpoints, key: DPoPKey = .generate(),
              client: TestClient? = nil, redirectURI: String? = nil, expectedDID: String? = nil)
        async throws -> (pending: PendingAuthorization, requestURI: String)
    {
        let client = client ?? loopbackClient
        let pkce = PKCE.generate()
        let state = SecureRandom.state()
        let request = AuthorizationRequest(clientID: client.clientID, redirectURI: redirectURI ?? client.redirectURI,
                                           scope: client.scope, state: state, pkce: pkce, loginHint: account.handle)
        let pushed = try await server(endpoints, client: client)
            .pushAuthorization(request, dpopKey: key, nonceScope: account.handle)
        let authorization = PendingAuthorization(state: state, issuer: endpoints.issuer, pkce: pkce,
                                                 redirectURI: request.redirectURI, dpopKey: key,
                                                 expectedDID: expectedDID, createdAt: testbed.now)
        pending.insert(authorization)
        return (authorization, pushed.requestURI)
    }

    /// The browser's visit to the authorization endpoint: the server's answer, redirect not followed.
    func authorize(_ requestURI: String, endpoints: AuthorizationServerEndpoints, client: TestClient? = nil)
        async throws -> InboundResponse
    {
        let url = try #require(OAuthRequests.authorizationURL(
            endpoint: endpoints.authorization, clientID: (client ?? loopbackClient).clientID, requestURI: requestURI))
        return try await http.send(OutboundRequest(url: url))
    }

    /// The callback the redirect carries, checked by `PendingAuthorizations` (state and `iss`).
    func callback(_ response: InboundResponse) throws -> (authorization: PendingAuthorization, code: String) {
        #expect(response.status == 302)
        let location = try #require(response.header("Location"))
        return try pending.complete(try AuthorizationCallback(redirectURL: try #require(URL(string: location))),
                                    now: testbed.now)
    }

    struct Login {
        let endpoints: AuthorizationServerEndpoints
        var client: TestClient
        let key: DPoPKey
        var tokens: OAuthTokenSet
    }

    /// The whole flow: discovery, PAR, authorize, callback, code exchange; nonces moved to the DID.
    func login(_ account: TestAccount, issuer: String? = nil, client: TestClient? = nil) async throws -> Login {
        let client = client ?? loopbackClient
        let endpoints = try await discover(issuer: issuer)
        let key = DPoPKey.generate()
        let (_, requestURI) = try await push(account, endpoints: endpoints, key: key, client: client)
        let (authorization, code) = try callback(try await authorize(requestURI, endpoints: endpoints, client: client))
        let tokens = try await server(endpoints, client: client)
            .exchangeCode(code, for: authorization, nonceScope: account.handle)
        nonces.move(from: account.handle, to: tokens.did.description)
        return Login(endpoints: endpoints, client: client, key: key, tokens: tokens)
    }

    /// `com.atproto.server.getSession` with the login's DPoP-bound access token.
    func getSession(_ login: Login) async throws -> InboundResponse {
        let url = try #require(URL(string: testbed.pdsURL + "/xrpc/com.atproto.server.getSession"))
        return try await resource.send(OutboundRequest(url: url), accessToken: login.tokens.accessToken,
                                       dpopKey: login.key, account: login.tokens.did.description)
    }

    func refresh(_ login: Login, refreshToken: String? = nil) async throws(OAuthClientError) -> OAuthTokenSet {
        try await server(login.endpoints, client: login.client).refresh(refreshToken: refreshToken ?? login.tokens.refreshToken,
                                                  dpopKey: login.key, did: login.tokens.did.description)
    }
}

extension InboundResponse {
    /// The `error` and `error_description` of an OAuth or XRPC error body.
    var errorBody: (error: String?, description: String?) {
        let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
        return (object?["error"] as? String, (object?["error_description"] ?? object?["message"]) as? String)
    }
}

extension OAuthClientError {
    /// The server's OAuth error, when that is what this is.
    var serverError: OAuthErrorResponse? {
        if case .server(let error) = self { return error }
        return nil
    }
}
