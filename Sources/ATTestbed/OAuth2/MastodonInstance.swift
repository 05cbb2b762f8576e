import Foundation
import JSONRPC
import NIOHTTP1
import Synchronization

/// A Mastodon-compatible instance at `social.<domain>`, for accounts beyond atproto (issue 19):
/// app registration (`POST /api/v1/apps`), the authorization-code flow with PKCE S256 (approved
/// at once for the instance's default user, as the atproto authorization server approves),
/// tokens with rotating refresh tokens, revocation (`POST /oauth/revoke`), RFC 8414 metadata
/// (as Mastodon 4.3 publishes it) and `GET /api/v1/accounts/verify_credentials`.
///
/// Each endpoint can be made to fail (`Testbed.injectFailures(nsid: MastodonEndpoint.….failureKey`)
/// or to stall or lose its answer (`Testbed.shapeAnswers(at: .mastodon(…))`), as the atproto
/// servers can.
struct MastodonInstance: Sendable {
    let context: TestbedContext
    var host: String { context.mastodon.host }
    var origin: String { context.url(host: host) }
    var store: MastodonState { context.mastodon }

    func handle(_ request: TestbedRequest) -> TestbedResponse {
        let endpoint = MastodonEndpoint(method: Self.effectiveMethod(request), path: request.path)
        guard let endpoint else { return .json(["error": "Record not found"], status: .notFound) }
        store.records.withLock { $0.requests[endpoint.rawValue, default: 0] += 1 }
        return OAuth2Forms.answer(context, failureKey: endpoint.failureKey) { () throws(OAuthFailure) in
            switch endpoint {
            case .metadata: metadata()
            case .registerApp: try registerApp(request)
            case .authorize: try authorize(request)
            case .token: try token(request)
            case .revoke: try revoke(request)
            case .verifyCredentials: verifyCredentials(request)
            case .postStatus: try postStatus(request)
            case .postMedia: postMedia(request)
            case .deleteStatus: deleteStatus(request)
            }
        }
    }

    /// The method a POST stands for, as Rails and its kin read it: `_method` in the query or
    /// in the (decoded) form or JSON body, or `X-HTTP-Method-Override`. What a client policy
    /// granting POST alone must never let through.
    static func effectiveMethod(_ request: TestbedRequest) -> HTTPMethod {
        guard request.method == .POST else { return request.method }
        // Only bodies Rails reads into parameters: forms and JSON, by their content type.
        let type = request.headers.first(name: "content-type")?.lowercased() ?? ""
        let readsBody = type.hasPrefix("application/x-www-form-urlencoded") || type.hasPrefix("application/json")
        let fields = readsBody ? (try? OAuth2Forms.fields(request)) ?? [:] : [:]
        let named = request.query.first { $0.key.lowercased() == "_method" }?.value
            ?? fields.first { $0.key.lowercased() == "_method" }?.value.first
            ?? request.headers.first(name: "x-http-method-override")
        guard let named, !named.isEmpty else { return .POST }
        return HTTPMethod(rawValue: named.uppercased())
    }

    /// RFC 8414 metadata, with Mastodon's `app_registration_endpoint`. The issuer ends in `/`,
    /// as Mastodon 4.3 writes it (its `root_url`).
    private func metadata() -> TestbedResponse {
        .json([
            "issuer": .string(origin + "/"),
            "authorization_endpoint": .string(origin + "/oauth/authorize"),
            "token_endpoint": .string(origin + "/oauth/token"),
            "revocation_endpoint": .string(origin + "/oauth/revoke"),
            "app_registration_endpoint": .string(origin + "/api/v1/apps"),
            "userinfo_endpoint": .string(origin + "/oauth/userinfo"),
            "scopes_supported": ["read", "write", "follow", "push", "profile"],
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "client_credentials", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "service_documentation": "https://docs.joinmastodon.org/",
        ])
    }
}

/// The instance's endpoints, by method and path.
public enum MastodonEndpoint: String, Sendable, CaseIterable, Hashable {
    case metadata, registerApp, authorize, token, revoke, verifyCredentials, postStatus, postMedia, deleteStatus

    init?(method: HTTPMethod, path: String) {
        switch (method, path) {
        case (.GET, "/.well-known/oauth-authorization-server"): self = .metadata
        case (.POST, "/api/v1/apps"): self = .registerApp
        case (.GET, "/oauth/authorize"): self = .authorize
        case (.POST, "/oauth/token"): self = .token
        case (.POST, "/oauth/revoke"): self = .revoke
        case (.GET, "/api/v1/accounts/verify_credentials"): self = .verifyCredentials
        case (.POST, "/api/v1/statuses"): self = .postStatus
        case (.POST, "/api/v2/media"): self = .postMedia
        case (.DELETE, let path) where path.hasPrefix("/api/v1/statuses/"): self = .deleteStatus
        default: return nil
        }
    }

    /// The key under which `Testbed.injectFailures(nsid:…)` makes it fail.
    public var failureKey: String { "mastodon:" + rawValue }
}

/// The instance's records, kept by the testbed's context (the instance answers from them).
final class MastodonState: Sendable {
    struct App: Sendable {
        var name: String
        var secret: String
        var redirectURIs: [String]
        var scopes: Set<String>
    }

    struct User: Sendable {
        var id: String
        var username: String
        var displayName: String
        var avatar: String
    }

    struct Records: Sendable {
        var apps: [String: App] = [:]
        var users: [String: User] = [:]
        /// Who `authorize` approves for; the first user when nil.
        var defaultUserID: String?
        var grants = OAuth2GrantBook()
        /// Requests by endpoint (`MastodonEndpoint.rawValue`).
        var requests: [String: Int] = [:]
        /// Statuses posted: (author id, text), oldest first.
        var statuses: [(author: String, text: String)] = []
        /// Ids (1-based positions in `statuses`) of the statuses deleted.
        var deletedStatuses: Set<String> = []
    }

    let host: String
    let records = Mutex(Records())
    /// What `expires_in` says of access tokens.
    let accessTokenLifetime = Mutex(Duration.seconds(7200))
    /// As mastodon.social runs: no refresh token, and tokens that never expire (no `expires_in`).
    let asRunInProduction = Mutex(false)

    init(domain: String) {
        host = "social.\(domain)"
    }
}
