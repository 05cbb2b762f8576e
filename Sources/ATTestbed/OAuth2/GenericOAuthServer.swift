import Crypto
import Foundation
import JSONRPC
import NIOHTTP1
import Synchronization
import WebBasics

/// A plain OAuth 2.0 authorization server at `sso.<domain>`, of the kind the people blueskyd is
/// for sign in to besides Bluesky (issue 19): RFC 8414 metadata (and the same document at the
/// OpenID discovery path), RFC 7591 dynamic registration of public clients, the authorization
/// code with PKCE S256 and RFC 9207 `iss` (approved at once for its default user), JWT access
/// tokens (HS256, 24 hours unless set), rotating refresh tokens (or none, when a test says so),
/// RFC 7009 revocation and a `userinfo` profile.
struct GenericOAuthServer: Sendable {
    let context: TestbedContext
    var store: GenericOAuthState { context.genericOAuth }
    var origin: String { context.url(host: store.host) }

    func handle(_ request: TestbedRequest) -> TestbedResponse {
        guard let endpoint = GenericOAuthEndpoint(method: request.method, path: request.path) else {
            return OAuthFailure(.notFound, "not_found", "No such endpoint").response
        }
        return OAuth2Forms.answer(context, failureKey: endpoint.failureKey) { () throws(OAuthFailure) in
            switch endpoint {
            case .metadata: metadata()
            case .register: try register(request)
            case .authorize: try authorize(request)
            case .token: try token(request)
            case .revoke: try revoke(request)
            case .userinfo: userinfo(request)
            }
        }
    }

    private func metadata() -> TestbedResponse {
        .json([
            "issuer": .string(origin),
            "authorization_endpoint": .string(origin + "/authorize"),
            "token_endpoint": .string(origin + "/token"),
            "registration_endpoint": .string(origin + "/register"),
            "revocation_endpoint": .string(origin + "/revoke"),
            "userinfo_endpoint": .string(origin + "/userinfo"),
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "scopes_supported": ["openid", "profile", "offline_access", "read", "write"],
            "authorization_response_iss_parameter_supported": true,
        ])
    }

    /// RFC 7591: a public client (`token_endpoint_auth_method` `none`) with its redirect URIs.
    private func register(_ request: TestbedRequest) throws(OAuthFailure) -> TestbedResponse {
        let fields = try OAuth2Forms.fields(request)
        let redirects = fields["redirect_uris"] ?? []
        guard !redirects.isEmpty, redirects.allSatisfy({ URL(string: $0)?.scheme != nil }) else {
            throw OAuthFailure(.badRequest, "invalid_redirect_uri", "redirect_uris must be absolute URIs")
        }
        let method = fields["token_endpoint_auth_method"]?.first ?? "none"
        guard method == "none" else {
            throw OAuthFailure(.badRequest, "invalid_client_metadata", "only public clients (token_endpoint_auth_method none) are registered")
        }
        let clientID = "cli-" + Encodings.randomToken(bytes: 16)
        let now = context.clock.now()
        store.records.withLock { records in
            records.clients[clientID] = redirects
            records.clientsRegistered += 1
        }
        var answer: [String: JSONValue] = [
            "client_id": .string(clientID), "client_id_issued_at": .number(now.timeIntervalSince1970.rounded(.down)),
            "redirect_uris": .array(redirects.map(JSONValue.string)), "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
        ]
        if let name = fields["client_name"]?.first { answer["client_name"] = .string(name) }
        var response = TestbedResponse.json(.object(answer))
        response.status = .created
        return response
    }

    private func authorize(_ request: TestbedRequest) throws(OAuthFailure) -> TestbedResponse {
        let query = request.query
        guard query["response_type"] == "code" else { throw OAuthFailure(.badRequest, "unsupported_response_type", "Only code") }
        let clientID = try OAuth2Forms.required("client_id", in: query)
        let redirectURI = try OAuth2Forms.required("redirect_uri", in: query)
        guard let redirects = store.records.withLock({ $0.clients[clientID] }) else { throw .invalidClient("Unknown client") }
        guard redirects.contains(redirectURI) else { throw .invalidRequest("redirect_uri is not registered") }
        guard query["code_challenge_method"] == "S256", let challenge = query["code_challenge"], !challenge.isEmpty else {
            throw .invalidRequest("PKCE S256 is required")
        }
        let now = context.clock.now()
        let scope = query["scope"] ?? "read"
        let code = store.records.withLock { records -> String? in
            guard let subject = records.users.keys.sorted().first else { return nil }
            let grant = OAuth2GrantBook.Grant(id: Encodings.randomToken(), clientID: clientID, subject: subject, scope: scope)
            return records.grants.issueCode(for: grant, redirectURI: redirectURI, challenge: challenge, now: now)
        }
        let state = query["state"]
        guard let code else { return OAuth2Forms.redirect(redirectURI, [("error", "access_denied"), ("state", state), ("iss", origin)]) }
        return OAuth2Forms.redirect(redirectURI, [("code", code), ("state", state), ("iss", origin)])
    }

    private func token(_ request: TestbedRequest) throws(OAuthFailure) -> TestbedResponse {
        let fields = try OAuth2Forms.fields(request).compactMapValues(\.first)
        let clientID = try OAuth2Forms.required("client_id", in: fields)
        let now = context.clock.now()
        let (lifetime, issuesRefresh) = store.settings.withLock { ($0.accessTokenLifetime, $0.issuesRefreshTokens) }
        return try store.records.withLock { records throws(OAuthFailure) -> TestbedResponse in
            guard records.clients[clientID] != nil else { throw .invalidClient("Unknown client") }
            let grant = try records.grants.grant(for: fields, clientID: clientID, now: now)
            let expiresAt = now.addingTimeInterval(lifetime.seconds)
            let access = store.jwt(subject: grant.subject, clientID: clientID, scope: grant.scope, issuer: origin, now: now, expiresAt: expiresAt)
            let refresh = records.grants.issue(access: access, for: grant, expiresAt: expiresAt, withRefresh: issuesRefresh)
            return OAuth2Forms.tokenAnswer(access: access, refresh: refresh, scope: grant.scope, lifetime: lifetime, now: now)
        }
    }

    private func revoke(_ request: TestbedRequest) throws(OAuthFailure) -> TestbedResponse {
        let fields = try OAuth2Forms.fields(request).compactMapValues(\.first)
        store.records.withLock { _ = $0.grants.revoke(fields["token"] ?? "") }
        return .json([:])
    }

    /// The signed-in user, as OpenID's userinfo shapes it; 401 with `WWW-Authenticate: Bearer`.
    private func userinfo(_ request: TestbedRequest) -> TestbedResponse {
        let now = context.clock.now()
        let token = OAuth2Forms.bearer(request) ?? ""
        return store.records.withLock { records in
            switch records.grants.authenticate(token, now: now) {
            case .failure(let refusal):
                var response = OAuthFailure(.unauthorized, "invalid_token", refusal == .expired ? "The access token expired" : "Invalid token").response
                response.headers.replaceOrAdd(name: "WWW-Authenticate", value: #"Bearer error="invalid_token""#)
                return response
            case .success(let grant):
                let user = records.users[grant.subject]
                return .json(["sub": .string(grant.subject), "preferred_username": .string(user?.username ?? ""),
                              "name": .string(user?.name ?? ""), "picture": .string(origin + "/pictures/\(grant.subject).png")])
            }
        }
    }
}

/// The generic server's endpoints.
public enum GenericOAuthEndpoint: String, Sendable, CaseIterable, Hashable {
    case metadata, register, authorize, token, revoke, userinfo

    init?(method: HTTPMethod, path: String) {
        switch (method, path) {
        case (.GET, "/.well-known/oauth-authorization-server"), (.GET, "/.well-known/openid-configuration"): self = .metadata
        case (.POST, "/register"): self = .register
        case (.GET, "/authorize"): self = .authorize
        case (.POST, "/token"): self = .token
        case (.POST, "/revoke"): self = .revoke
        case (.GET, "/userinfo"): self = .userinfo
        default: return nil
        }
    }

    /// The key under which `Testbed.injectFailures(nsid:…)` makes it fail.
    public var failureKey: String { "oauth2:" + rawValue }
}
