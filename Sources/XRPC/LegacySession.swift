import Foundation
import WebBasics

/// An app-password session as the PDS hands it out (`createSession` / `refreshSession`).
public struct LegacySession: Sendable, Equatable {
    public var did: String
    public var handle: String?
    public var accessJwt: String
    public var refreshJwt: String
    /// From the access token's `exp`; nil if the token doesn't say.
    public var accessExpiresAt: Date?
    public var refreshExpiresAt: Date?
    /// The PDS named in the DID document the server returned, when it did.
    public var didDocumentPDS: URL?

    public init(did: String, handle: String?, accessJwt: String, refreshJwt: String, didDocumentPDS: URL? = nil) {
        self.did = did
        self.handle = handle
        self.accessJwt = accessJwt
        self.refreshJwt = refreshJwt
        self.accessExpiresAt = JWTClaims(token: accessJwt)?.expiresAt
        self.refreshExpiresAt = JWTClaims(token: refreshJwt)?.expiresAt
        self.didDocumentPDS = didDocumentPDS
    }
}

/// Why a session call failed, sorted by what the daemon should do about it.
public enum SessionError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server emailed a sign-in code; call again with it.
    case authFactorTokenRequired(String)
    /// Wrong identifier or password.
    case authenticationFailed(String)
    /// The token presented has expired (`ExpiredToken`).
    case expiredToken(String)
    /// The server rejected the session for good (revoked, invalid, deleted account...).
    case rejected(String)
    /// The server answered 5xx or 429: try again later.
    case transient(String, retryAfter: TimeInterval?)
    /// No answer (network trouble, timeout): the request may or may not have reached the
    /// server, so a refresh may have rotated the token. Try again later.
    case noAnswer(String)
    /// The server answered something we cannot read.
    case protocolViolation(String)

    public var description: String {
        switch self {
        case .authFactorTokenRequired(let m): "a sign-in code is required: \(m)"
        case .authenticationFailed(let m): "authentication failed: \(m)"
        case .expiredToken(let m): "token expired: \(m)"
        case .rejected(let m): "session rejected by the server: \(m)"
        case .transient(let m, _): "temporary failure: \(m)"
        case .noAnswer(let m): "no answer from the server: \(m)"
        case .protocolViolation(let m): "unexpected answer from the server: \(m)"
        }
    }

    /// The server's own words, for `stateReason`.
    /// Stored as the account's state reason and logged: at most 1 KiB, whatever a server put
    /// in it (its parsers cut each field already; this bounds what they are joined into).
    public var reason: String {
        switch self {
        case .authFactorTokenRequired(let m), .authenticationFailed(let m), .expiredToken(let m),
             .rejected(let m), .transient(let m, _), .noAnswer(let m), .protocolViolation(let m):
            ServerText.clipped(m, limit: 1_024)
        }
    }
}
