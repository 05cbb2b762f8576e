import Foundation

/// Failures of an outbound HTTP exchange, each with one clear line for the user.
public enum HTTPError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidURL(String)
    case insecureURL(String)
    case timedOut(String)
    case bodyTooLarge(String, limit: Int)
    case unreachable(String, reason: String)
    /// The connection closed after the request was sent and before any answer, and the request
    /// is not idempotent (a procedure, POST): the server may have acted on it, so it was not
    /// sent again. Whoever made it must look before repeating it.
    case mayHaveBeenReceived(String)
    /// The `ca_file` (extra certificate authorities) cannot be read or holds no PEM certificate.
    case unusableCAFile(String, reason: String)

    public var description: String {
        switch self {
        case .invalidURL(let url): "invalid URL: \(url)"
        case .insecureURL(let url): "refusing plain http to \(url) (only https, or http to loopback when allow_insecure_loopback is set)"
        case .timedOut(let url): "request to \(url) timed out"
        case .bodyTooLarge(let url, let limit): "response from \(url) is larger than \(limit) bytes"
        case .unreachable(let url, let reason): "cannot reach \(url): \(reason)"
        case .mayHaveBeenReceived(let url):
            "the connection to \(url) closed after the request was sent and before any answer; the server may have received it, so it was not sent again"
        case .unusableCAFile(let path, let reason): "cannot use the CA file \(path) (ca_file): \(reason)"
        }
    }

    /// Network-level failures are worth retrying later; policy failures are not, and neither
    /// is a request that may already have taken effect (retrying it could apply it twice).
    public var isTransient: Bool {
        switch self {
        case .timedOut, .unreachable: true
        case .invalidURL, .insecureURL, .bodyTooLarge, .unusableCAFile, .mayHaveBeenReceived: false
        }
    }
}
