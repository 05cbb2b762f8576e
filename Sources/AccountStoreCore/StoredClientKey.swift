import Foundation

/// A confidential OAuth client's signing key as stored: its `kid` and raw P-256 private scalar.
public struct StoredClientKey: Sendable, Equatable {
    public var keyID: String
    /// The 32-byte private scalar. Sealed at rest; never logged.
    public var privateKey: Data
    public var createdAt: Date

    public init(keyID: String, privateKey: Data, createdAt: Date) {
        self.keyID = keyID
        self.privateKey = privateKey
        self.createdAt = createdAt
    }

    /// Sealed client keys carry their own purpose label, so that neither an account's blob nor
    /// another key's can be passed off as this one.
    package static func additionalData(keyID: String) -> Data {
        Data("blueskyd/oauth-client-key/v1/".utf8) + Data(keyID.utf8)
    }
}

extension StoredClientKey: CustomStringConvertible, CustomDebugStringConvertible {
    public var description: String { "StoredClientKey(kid: \(keyID), private part redacted)" }
    public var debugDescription: String { description }
}
