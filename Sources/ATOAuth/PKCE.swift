import Crypto
import DPoP
import WebBasics

/// Proof Key for Code Exchange (RFC 7636) with the S256 method, the only one atproto allows.
public struct PKCE: Sendable, Equatable {
    /// The challenge method sent with the authorization request.
    public static let method = "S256"

    /// The secret kept by the client until the token exchange (`code_verifier`).
    public let verifier: String
    /// base64url(SHA-256(verifier)), sent in the authorization request (`code_challenge`).
    public let challenge: String

    /// A fresh verifier from 32 random bytes: 43 base64url characters, all in RFC 7636's
    /// unreserved set, with the 256 bits of entropy §7.1 recommends.
    public static func generate() -> PKCE {
        // base64url output is always a valid verifier, so this cannot fail.
        try! PKCE(verifier: Base64URL.encode(SecureRandom.bytes(count: 32)))
    }

    /// Rebuilds the pair from a stored verifier, checking RFC 7636 §4.1's syntax
    /// (43 to 128 characters of `A-Z a-z 0-9 - . _ ~`).
    public init(verifier: String) throws(PKCEError) {
        guard (43...128).contains(verifier.utf8.count) else { throw .invalidVerifierLength(verifier.utf8.count) }
        guard verifier.utf8.allSatisfy(FormEncoding.isUnreserved) else { throw .invalidVerifierCharacters }
        self.verifier = verifier
        challenge = Self.challenge(for: verifier)
    }

    /// The S256 challenge of `verifier`: base64url(SHA-256(ASCII(verifier))).
    public static func challenge(for verifier: String) -> String {
        Base64URL.encode(SHA256.hash(data: Array(verifier.utf8)))
    }
}

extension PKCE: CustomStringConvertible, CustomDebugStringConvertible {
    // The verifier is what turns a stolen code into tokens: keep it out of logs.
    public var description: String { "PKCE(challenge: \(challenge), verifier redacted)" }
    public var debugDescription: String { description }
}

/// A stored PKCE verifier that breaks RFC 7636's syntax.
public enum PKCEError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidVerifierLength(Int)
    case invalidVerifierCharacters

    public var description: String {
        switch self {
        case .invalidVerifierLength(let count): "a PKCE code verifier has 43 to 128 characters, not \(count)"
        case .invalidVerifierCharacters: "a PKCE code verifier may only contain A-Z a-z 0-9 - . _ ~"
        }
    }
}

/// Unpredictable values for the authorization flow.
public enum SecureRandom {
    /// `count` bytes from the system's cryptographically secure generator.
    public static func bytes(count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// A new `state` for an authorization request: 32 random bytes, base64url (43 characters),
    /// so it cannot be guessed to forge a callback.
    public static func state() -> String {
        Base64URL.encode(bytes(count: 32))
    }
}
