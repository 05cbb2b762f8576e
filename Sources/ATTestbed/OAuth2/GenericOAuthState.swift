import Crypto
import Foundation
import JSONRPC
import Synchronization
import WebBasics

/// The generic OAuth 2.0 server's clients, users, grants and settings.
final class GenericOAuthState: Sendable {
    struct User: Sendable {
        var username: String
        var name: String
    }

    struct Records: Sendable {
        /// Registered public clients and their redirect URIs.
        var clients: [String: [String]] = [:]
        var clientsRegistered = 0
        /// Users by subject; the first (sorted) is who authorizations approve.
        var users: [String: User] = [:]
        var grants = OAuth2GrantBook()
    }

    struct Settings: Sendable {
        var accessTokenLifetime: Duration = .seconds(24 * 3600)
        /// False: token answers carry no refresh token (the session ends with its access token).
        var issuesRefreshTokens = true
    }

    let host: String
    let records = Mutex(Records())
    let settings = Mutex(Settings())
    private let signingKey = SymmetricKey(size: .bits256)

    init(domain: String) {
        host = "sso.\(domain)"
    }

    /// An HS256 JWT access token (RFC 9068's claims).
    func jwt(subject: String, clientID: String, scope: String, issuer: String, now: Date, expiresAt: Date) -> String {
        let header = Base64URL.encode(Array(#"{"alg":"HS256","typ":"at+jwt"}"#.utf8))
        let claims: JSONValue = [
            "iss": .string(issuer), "sub": .string(subject), "aud": .string(issuer), "client_id": .string(clientID),
            "scope": .string(scope), "iat": .number(now.timeIntervalSince1970.rounded(.down)),
            "exp": .number(expiresAt.timeIntervalSince1970.rounded(.down)), "jti": .string(Encodings.randomToken()),
        ]
        let signingInput = header + "." + Base64URL.encode(claims.encoded())
        let signature = HMAC<SHA256>.authenticationCode(for: Array(signingInput.utf8), using: signingKey)
        return signingInput + "." + Base64URL.encode(Array(signature))
    }
}

/// The generic OAuth 2.0 server, as tests drive it.
extension Testbed {
    /// `https://sso.<domain>[:port]`, its issuer.
    public var genericOAuthURL: String { context.url(host: context.genericOAuth.host) }

    /// Adds a user (`subject` its id); the first by subject is the one authorizations approve.
    public func addGenericOAuthUser(subject: String, username: String, name: String) {
        context.genericOAuth.records.withLock { $0.users[subject] = GenericOAuthState.User(username: username, name: name) }
    }

    /// Access token lifetime, and whether token answers carry a refresh token, from now on.
    public func configureGenericOAuth(accessTokenLifetime: Duration? = nil, issuesRefreshTokens: Bool? = nil) {
        context.genericOAuth.settings.withLock { settings in
            if let accessTokenLifetime { settings.accessTokenLifetime = accessTokenLifetime }
            if let issuesRefreshTokens { settings.issuesRefreshTokens = issuesRefreshTokens }
        }
    }

    public var genericOAuthStats: OAuth2Stats {
        context.genericOAuth.records.withLock { records in
            var stats = records.grants.stats
            stats.clientsRegistered = records.clientsRegistered
            return stats
        }
    }
}
