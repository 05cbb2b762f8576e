import ATOAuth
import BlueskyHTTP
import Foundation
import JSONRPC

/// Tokens an OAuth 2.0 server granted. Never printed: `description` names no token.
public struct OAuth2Tokens: Sendable, Equatable, CustomStringConvertible {
    public var accessToken: String
    /// Nil when the server issues none: the session ends when the access token does.
    public var refreshToken: String?
    /// From `expires_in`; nil when the server gave none (a token that does not expire).
    public var accessExpiresAt: Date?
    public var scope: String?

    public var description: String {
        "OAuth2Tokens(refresh token: \(refreshToken == nil ? "none" : "yes"), expires: \(accessExpiresAt.map { "\($0)" } ?? "never"))"
    }
}

/// The token endpoint and revocation of one server, for one registered client: the code
/// exchanged, a refresh token spent (each once: the caller makes its successor durable before
/// using it), a token revoked. A confidential client authenticates with `client_secret_post`
/// (what Mastodon and most servers take); a public one sends its `client_id`.
public struct OAuth2TokenClient: Sendable {
    let metadata: ProviderMetadata
    let client: RegisteredClient
    let http: any HTTPFetching
    let timeout: Duration
    let now: @Sendable () -> Date

    public init(metadata: ProviderMetadata, client: RegisteredClient, http: any HTTPFetching, timeout: Duration,
                now: @escaping @Sendable () -> Date = { Date() }) {
        self.metadata = metadata
        self.client = client
        self.http = http
        self.timeout = timeout
        self.now = now
    }

    public func exchange(code: String, verifier: String, redirectURI: String) async throws(OAuth2ClientError) -> OAuth2Tokens {
        try await tokens([("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI), ("code_verifier", verifier)])
    }

    public func refresh(_ refreshToken: String) async throws(OAuth2ClientError) -> OAuth2Tokens {
        try await tokens([("grant_type", "refresh_token"), ("refresh_token", refreshToken)])
    }

    /// RFC 7009; false when the server has no revocation endpoint.
    @discardableResult
    public func revoke(_ token: String) async throws(OAuth2ClientError) -> Bool {
        guard let endpoint = metadata.revocationEndpoint else { return false }
        _ = try await OAuth2Exchange.send(OAuth2Exchange.postForm(endpoint, authenticated([("token", token)])), http: http, timeout: timeout)
        return true
    }

    private func authenticated(_ fields: [(String, String)]) -> FormBody {
        var form = FormBody(fields)
        form.append("client_id", client.clientID)
        form.append("client_secret", client.clientSecret)
        return form
    }

    private func tokens(_ fields: [(String, String)]) async throws(OAuth2ClientError) -> OAuth2Tokens {
        let sentAt = now()
        let response = try await OAuth2Exchange.send(OAuth2Exchange.postForm(metadata.tokenEndpoint, authenticated(fields)),
                                                     http: http, timeout: timeout)
        let answer = try OAuth2Exchange.object(response, what: "the token answer")
        guard let access = answer["access_token"]?.stringValue, !access.isEmpty else { throw .invalidAnswer("no access_token") }
        // A missing token_type is taken as Bearer (some servers leave it out): a refresh answer
        // refused here would throw away a rotated refresh token the server has already spent.
        if let type = answer["token_type"]?.stringValue, type.lowercased() != "bearer" {
            throw .invalidAnswer("token_type is \(type), not Bearer")
        }
        // Counted from when the request left: the token cannot outlive what the server meant.
        let expiresIn = answer["expires_in"]?.doubleValue
        return OAuth2Tokens(accessToken: access, refreshToken: answer["refresh_token"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 },
                            accessExpiresAt: expiresIn.map { sentAt.addingTimeInterval($0) }, scope: answer["scope"]?.stringValue)
    }
}
