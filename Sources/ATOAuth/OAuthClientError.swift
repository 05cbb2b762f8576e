import BlueskyHTTP
import DPoP
import Foundation

/// Failures of a request to the authorization server, each with one clear line.
public enum OAuthClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The request did not complete (network, timeout, policy).
    case transport(HTTPError)
    /// The server answered with an OAuth error; `invalid_grant` keeps its reason.
    case server(OAuthErrorResponse)
    /// The server answered something that is neither success nor an OAuth error (a proxy's
    /// HTML page, say), with the wait it asked for, if any.
    case unexpectedResponse(status: Int, endpoint: String, retryAfter: TimeInterval? = nil)
    /// A successful token response that breaks the atproto rules.
    case invalidTokenResponse(TokenResponseError)
    /// A successful PAR response without a usable `request_uri`.
    case invalidPushedAuthorizationResponse
    case proof(DPoPError)
    case clientAssertion(ClientAssertionError)

    public var description: String {
        switch self {
        case .transport(let error): error.description
        case .server(let error): "the authorization server refused: \(error)"
        case .unexpectedResponse(let status, let endpoint, _): "\(endpoint) answered HTTP \(status) without an OAuth error"
        case .invalidTokenResponse(let error): "unusable token response: \(error)"
        case .invalidPushedAuthorizationResponse: "the PAR response has no request_uri"
        case .proof(let error): error.description
        case .clientAssertion(let error): error.description
        }
    }

    /// True when the grant itself is gone (log in again), as opposed to a failure worth retrying.
    public var isInvalidGrant: Bool {
        if case .server(let error) = self { return error.isInvalidGrant }
        return false
    }

    /// True for failures that may go away by themselves (network, server errors).
    public var isTransient: Bool {
        switch self {
        case .transport(let error): error.isTransient
        case .unexpectedResponse(let status, _, _): status >= 500
        case .server(let error): error.status >= 500
        default: false
        }
    }
}
