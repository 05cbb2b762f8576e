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

    public init(accessToken: String, refreshToken: String, dpopPrivateKey: Data? = nil) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.dpopPrivateKey = dpopPrivateKey
    }
}

extension AccountSecrets: CustomStringConvertible, CustomDebugStringConvertible {
    // Keeps tokens out of logs and debugger output even when someone interpolates the value.
    public var description: String { "AccountSecrets(redacted)" }
    public var debugDescription: String { description }
}
