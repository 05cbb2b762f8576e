import Foundation
import JSONRPC
import WebBasics

/// An OAuth error answer (RFC 6749 §5.2): `error`, and the reason in `error_description`.
///
/// Keep the description: for `invalid_grant` it is the only thing that tells "Refresh token
/// replayed" (the session was destroyed) from "Session expired" (log in again).
public struct OAuthErrorResponse: Sendable, Equatable, CustomStringConvertible {
    public var status: Int
    public var error: String
    public var errorDescription: String?
    /// Seconds the server asked to wait before trying again (`Retry-After`), when it said so.
    public var retryAfter: TimeInterval?

    public init(status: Int, error: String, errorDescription: String? = nil) {
        self.status = status
        self.error = error
        self.errorDescription = errorDescription
    }

    /// Reads an error body; nil when the body is not a JSON object with a string `error`.
    public init?(status: Int, body: some Collection<UInt8>) {
        guard let value = try? JSONValue.parse(body), let error = value["error"]?.stringValue, !error.isEmpty else {
            return nil
        }
        // Kept for people to read (a state reason, a log line): never a server's megabytes.
        self.init(status: status, error: ServerText.clipped(error, limit: 128),
                  errorDescription: ServerText.clipped(value["error_description"]?.stringValue))
    }

    /// The refresh token or code is no longer good: the grant is gone, not the network.
    public var isInvalidGrant: Bool { error == "invalid_grant" }

    /// The server wants a DPoP nonce.
    public var isUseDPoPNonce: Bool { error == "use_dpop_nonce" }

    public var description: String {
        "\(error)" + (errorDescription.map { ": \($0)" } ?? "") + " (HTTP \(status))"
    }
}
