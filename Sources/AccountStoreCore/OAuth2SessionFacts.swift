import Foundation

/// What an OAuth 2.0 server's session needs besides its tokens, sealed with them.
///
/// The client secret is a secret. The rest is not, but it decides where the bearer token goes
/// (the profile URL) and which registration later logins to the server reuse (the redirect URI
/// the client was registered with): sealed, it cannot be rewritten by someone who can write
/// the database but has no store key.
public struct OAuth2SessionFacts: Codable, Sendable, Equatable {
    /// The registered client's secret (Mastodon's apps have one); nil for a public client.
    public var clientSecret: String?
    /// The redirect URI the client was registered with: a later login reuses the registration
    /// only where it can receive the redirect there.
    public var redirectURI: String
    /// Where the signed-in user's profile is read (Mastodon's `verify_credentials`, OpenID's
    /// userinfo, NeoDB's `/api/me`, or a configured URL); nil when the server has none.
    public var profileURL: String?
    /// Which field of the profile answer holds what (`subject`, `handle`, `displayName`,
    /// `avatar`, `description` → a key, dotted for nested objects).
    public var profileFields: [String: String]
    /// The `[[provider]]` this account was signed in through, if any.
    public var provider: String?
    /// The scope the client was registered for (Mastodon refuses to authorise more than its
    /// app's scopes): a later login reuses the registration only for a scope within it. Nil for a
    /// client registered by hand.
    public var registeredScope: String?

    public init(clientSecret: String?, redirectURI: String, profileURL: String?, profileFields: [String: String],
                provider: String? = nil, registeredScope: String? = nil) {
        self.clientSecret = clientSecret
        self.redirectURI = redirectURI
        self.profileURL = profileURL
        self.profileFields = profileFields
        self.provider = provider
        self.registeredScope = registeredScope
    }
}

extension OAuth2SessionFacts: CustomStringConvertible, CustomDebugStringConvertible {
    public var description: String { "OAuth2SessionFacts(client secret: \(clientSecret == nil ? "none" : "redacted"))" }
    public var debugDescription: String { description }
}
