/// Failures to make a DPoP proof.
public enum DPoPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The request URL is not an absolute http(s) URL with a host.
    case invalidTargetURI(String)
    /// The HTTP method is not an uppercase token.
    case invalidMethod(String)
    /// The platform could not sign (should not happen with a valid key).
    case signingFailed(String)

    public var description: String {
        switch self {
        case .invalidTargetURI(let uri):
            // Without the query: it may carry parameters that have no place in a log line.
            "cannot make a DPoP proof for \(uri.prefix { $0 != "?" && $0 != "#" }): not an absolute http(s) URL"
        case .invalidMethod(let method): "cannot make a DPoP proof for HTTP method \(method)"
        case .signingFailed(let reason): "cannot sign the DPoP proof: \(reason)"
        }
    }
}
