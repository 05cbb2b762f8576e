import Crypto
import Foundation
import JSONRPC

/// The API a login needs: the signed-in user (the profile blueskyd caches), and the users tests
/// create.
extension MastodonInstance {
    /// `GET /api/v1/accounts/verify_credentials` with `Authorization: Bearer`.
    func verifyCredentials(_ request: TestbedRequest) -> TestbedResponse {
        let now = context.clock.now()
        let token = OAuth2Forms.bearer(request)
        return store.records.withLock { records in
            switch records.grants.authenticate(token ?? "", now: now) {
            case .failure(.unknown): return Self.unauthorized("The access token is invalid")
            case .failure(.expired): return Self.unauthorized("The access token expired")
            case .success(let grant):
                guard let user = records.users[grant.subject] else { return .json(["error": "This action is not allowed"], status: .forbidden) }
                return .json([
                    "id": .string(user.id), "username": .string(user.username), "acct": .string(user.username),
                    "display_name": .string(user.displayName), "avatar": .string(user.avatar),
                    "url": .string(origin + "/@" + user.username),
                ])
            }
        }
    }

    /// `POST /api/v1/statuses` (`status`, form or JSON): needs the `write` scope, as Mastodon does.
    func postStatus(_ request: TestbedRequest) throws(OAuthFailure) -> TestbedResponse {
        let fields = try OAuth2Forms.fields(request).compactMapValues(\.first)
        return writing(request) { records, grant in
            guard let text = fields["status"], !text.isEmpty else {
                return .json(["error": "Validation failed: Text can't be blank"], status: .unprocessableEntity)
            }
            records.statuses.append((grant.subject, text))
            return .json(["id": .string(String(records.statuses.count)), "content": .string("<p>\(text)</p>"),
                          "account": ["id": .string(grant.subject)]])
        }
    }

    /// `DELETE /api/v1/statuses/:id` (or a POST that says `_method=DELETE`): needs `write`.
    func deleteStatus(_ request: TestbedRequest) -> TestbedResponse {
        let id = String(request.path.dropFirst("/api/v1/statuses/".count))
        return writing(request) { records, _ in
            guard let index = Int(id), (1...records.statuses.count).contains(index), !records.deletedStatuses.contains(id) else {
                return .json(["error": "Record not found"], status: .notFound)
            }
            records.deletedStatuses.insert(id)
            return .json(["id": .string(id), "text": .string(records.statuses[index - 1].text)])
        }
    }

    /// `body` with the instance's records, for a request whose bearer token is live and holds
    /// the `write` scope (Mastodon's 401 and 403 otherwise).
    private func writing(_ request: TestbedRequest,
                         _ body: (inout MastodonState.Records, OAuth2GrantBook.Grant) -> TestbedResponse) -> TestbedResponse {
        let now = context.clock.now()
        let token = OAuth2Forms.bearer(request) ?? ""
        return store.records.withLock { records in
            guard case .success(let grant) = records.grants.authenticate(token, now: now) else {
                return Self.unauthorized("The access token is invalid")
            }
            guard grant.scope.split(separator: " ").contains(where: { $0 == "write" || $0 == "write:statuses" }) else {
                return .json(["error": "This action is outside the authorized scopes"], status: .forbidden)
            }
            return body(&records, grant)
        }
    }

    /// `POST /api/v2/media`: the body's bytes (any type; a real instance takes multipart), kept
    /// whole, answered with their count and SHA-256 so a test can tell they arrived intact.
    func postMedia(_ request: TestbedRequest) -> TestbedResponse {
        let now = context.clock.now()
        let token = OAuth2Forms.bearer(request) ?? ""
        let bytes = request.bodyBytes
        return store.records.withLock { records in
            guard case .success = records.grants.authenticate(token, now: now) else {
                return Self.unauthorized("The access token is invalid")
            }
            let digest = SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
            return .json(["id": .string(String(bytes.count)), "type": "unknown", "size": .number(Double(bytes.count)), "sha256": .string(digest)])
        }
    }

    /// A refused token, as Doorkeeper (Mastodon's OAuth) answers it.
    static func unauthorized(_ message: String) -> TestbedResponse {
        var response = TestbedResponse.json(["error": .string(message)], status: .unauthorized)
        response.headers.replaceOrAdd(name: "WWW-Authenticate",
                                      value: #"Bearer realm="Doorkeeper", error="invalid_token", error_description=""# + message + #"""#)
        return response
    }

    /// Adds a user; the first one is who `authorize` approves for, unless another is made the default.
    func addUser(username: String, displayName: String) -> String {
        store.records.withLock { records in
            let id = String(100_000 + records.users.count + 1)
            records.users[id] = MastodonState.User(id: id, username: username, displayName: displayName,
                                                   avatar: origin + "/avatars/\(username).png")
            return id
        }
    }
}

/// What the instance saw, for tests.
public struct MastodonStats: Sendable, Equatable {
    public var appsRegistered: Int
    public var grants: OAuth2Stats
    /// Requests by endpoint (`MastodonEndpoint.rawValue`).
    public var requests: [String: Int]
}

/// The Mastodon-compatible instance, as tests drive it.
extension Testbed {
    /// `https://social.<domain>[:port]`.
    public var mastodonURL: String { context.url(host: context.mastodon.host) }

    /// Adds a user of the instance; returns its id. The first is the one authorizations approve.
    @discardableResult
    public func addMastodonUser(username: String, displayName: String) -> String {
        MastodonInstance(context: context).addUser(username: username, displayName: displayName)
    }

    public var mastodonStats: MastodonStats {
        context.mastodon.records.withLock { MastodonStats(appsRegistered: $0.apps.count, grants: $0.grants.stats, requests: $0.requests) }
    }

    /// The `expires_in` of access tokens issued from now on.
    public func setMastodonAccessTokenLifetime(_ lifetime: Duration) {
        context.mastodon.accessTokenLifetime.withLock { $0 = lifetime }
    }

    /// Live grants (an authorization and everything refreshed from it) of the instance.
    /// Changes a user's display name (what `verify_credentials` says from now on).
    public func renameMastodonUser(_ username: String, displayName: String) {
        context.mastodon.records.withLock { records in
            for (id, user) in records.users where user.username == username { records.users[id]?.displayName = displayName }
        }
    }

    /// As mastodon.social runs: no refresh token, access tokens that never expire (`true`), or
    /// the testbed's default of rotating refresh tokens and expiring access tokens (`false`).
    public func runMastodonAsInProduction(_ production: Bool) {
        context.mastodon.asRunInProduction.withLock { $0 = production }
    }

    /// Revokes every grant of the instance, as a user removing the app in their settings does.
    public func revokeMastodonGrants() {
        context.mastodon.records.withLock { records in records.grants.revokeAll() }
    }

    /// The statuses posted, as (author id, text).
    public var mastodonStatuses: [(author: String, text: String)] { context.mastodon.records.withLock { $0.statuses } }

    public var mastodonLiveGrants: Int { context.mastodon.records.withLock { $0.grants.liveGrants } }
}
