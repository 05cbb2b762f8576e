import ATOAuth
import Foundation

/// Why a step with an OAuth 2.0 server failed, in words that name the server and the rule.
public enum OAuth2ClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server answered with an OAuth error (`invalid_grant` ends a session; others say
    /// what is wrong with the request or the client).
    case refused(OAuthErrorResponse)
    /// No verdict: the server failed (5xx), asked to wait (429) or answered with a page.
    /// `retryAfter`: what it asked, in seconds.
    case unavailable(String, retryAfter: TimeInterval?)
    /// The answer was lost (a connection that failed or timed out after the request left):
    /// the server may have acted on it, and a refresh token sent may be spent.
    case noAnswer(String)
    /// An answer that breaks the protocol (no `access_token`, a foreign `issuer`, garbage).
    case invalidAnswer(String)
    /// A URL the server gave that blueskyd will not contact (not https, or not absolute).
    case insecureURL(String)
    /// The server offers neither RFC 7591 registration nor Mastodon's app registration, and no
    /// client id is configured for it.
    case registrationUnavailable(String)

    public var description: String {
        switch self {
        case .refused(let error): "the server refused: \(error)"
        case .unavailable(let reason, let retryAfter):
            "the server is unavailable: \(reason)" + (retryAfter.map { "; try again in \(Int($0.rounded(.up))) s" } ?? "")
        case .noAnswer(let reason): "no answer from the server: \(reason)"
        case .invalidAnswer(let detail): "the server's answer is unusable: \(detail)"
        case .insecureURL(let url): "the server named \(url), which is not an https URL"
        case .registrationUnavailable(let issuer):
            "\(issuer) offers no client registration (RFC 7591 or Mastodon's /api/v1/apps): configure its client id in a [[provider]]"
        }
    }

    /// True only for the verdict that ends a session: the grant is gone.
    public var endsSession: Bool {
        if case .refused(let error) = self { return error.isInvalidGrant }
        return false
    }
}
