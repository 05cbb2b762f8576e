import Foundation

/// The credentials of one account. Never logged, never stored in plain text:
/// the store seals them with AES-GCM before they reach the database.
///
/// New optional fields can be added freely: they decode as `nil` from older blobs.
public struct AccountSecrets: Codable, Sendable, Equatable {
    public var accessToken: String
    public var refreshToken: String
    /// The DPoP private key of an OAuth session (raw representation), if any.
    public var dpopPrivateKey: Data?
    /// What an OAuth 2.0 server's session needs besides its tokens (nil for atproto accounts).
    public var oauth2: OAuth2SessionFacts?

    /// - Parameter refreshToken: empty when the server issued none (an `oauth2-access-only` session).
    public init(accessToken: String, refreshToken: String, dpopPrivateKey: Data? = nil, oauth2: OAuth2SessionFacts? = nil) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.dpopPrivateKey = dpopPrivateKey
        self.oauth2 = oauth2
    }
}

extension AccountSecrets: CustomStringConvertible, CustomDebugStringConvertible {
    // Keeps tokens out of logs and debugger output even when someone interpolates the value.
    public var description: String { "AccountSecrets(redacted)" }
    public var debugDescription: String { description }
}
