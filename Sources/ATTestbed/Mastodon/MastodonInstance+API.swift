import Foundation
import JSONRPC

/// The API a login needs: the signed-in user (the profile blueskyd caches), and the users tests
/// create.
extension MastodonInstance {
    /// `GET /api/v1/accounts/verify_credentials` with `Authorization: Bearer`.
    func verifyCredentials(_ request: TestbedRequest) -> TestbedResponse {
        let now = context.clock.now()
        let header = request.headers.first(name: "authorization") ?? ""
        let token = header.lowercased().hasPrefix("bearer ") ? String(header.dropFirst(7)) : ""
        return store.records.withLock { state in
            guard let access = state.accessTokens[token] else {
                state.stats.rejectedCalls += 1
                return .json(["error": "The access token is invalid"], status: .unauthorized)
            }
            guard access.expiresAt > now else {
                state.stats.rejectedCalls += 1
                return .json(["error": "The access token expired"], status: .unauthorized)
            }
            guard let user = state.users[access.grant.userID] else {
                return .json(["error": "This action is not allowed"], status: .forbidden)
            }
            state.stats.authenticatedCalls += 1
            return .json([
                "id": .string(user.id), "username": .string(user.username), "acct": .string(user.username),
                "display_name": .string(user.displayName), "avatar": .string(user.avatar),
                "url": .string(origin + "/@" + user.username),
            ])
        }
    }

    /// Adds a user; the first one is who `authorize` approves for, unless another is made the default.
    func addUser(username: String, displayName: String) -> String {
        store.records.withLock { state in
            let id = String(100_000 + state.users.count + 1)
            state.users[id] = MastodonState.User(id: id, username: username, displayName: displayName,
                                   avatar: origin + "/avatars/\(username).png")
            return id
        }
    }
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

    public var mastodonStats: MastodonStats { context.mastodon.records.withLock { $0.stats } }

    /// The `expires_in` of access tokens issued from now on.
    public func setMastodonAccessTokenLifetime(_ lifetime: Duration) {
        context.mastodon.accessTokenLifetime.withLock { $0 = lifetime }
    }

    /// Live grants (an authorization and everything refreshed from it) of the instance.
    public var mastodonLiveGrants: Int {
        context.mastodon.records.withLock { Set($0.refreshTokens.values.map { $0.id }).count }
    }
}
