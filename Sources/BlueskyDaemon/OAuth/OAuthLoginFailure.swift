import ATOAuth
import Foundation
import JSONRPC

/// Why an OAuth login failed, each with its own stable error name (docs/PROTOCOL.md).
/// A failed login stores nothing.
public enum OAuthLoginFailure: Error, Sendable, Equatable {
    /// No login in progress has this id (finished, cancelled, expired, or another daemon run).
    case loginNotFound(String)
    /// The identifier is not a handle, a DID or an http(s) URL.
    case invalidIdentifier(String)
    /// Discovery failed: a metadata document broke a rule, or a server is not https.
    case metadataInvalid(String)
    /// The callback's state matches no login (or another login than the one named).
    case stateUnknown
    /// The callback's state was already used.
    case stateReused
    /// The callback's `iss` is not the issuer the login was started with.
    case issuerMismatch(expected: String, actual: String)
    /// The callback is malformed or lacks `iss` or a code.
    case callbackInvalid(String)
    /// The user or the server refused the authorization (`error` in the callback).
    case authorizationDenied(String)
    /// The tokens are for another account than the one the login named.
    case subjectMismatch(expected: String, actual: String)
    /// The token answer breaks a rule (type not DPoP, scope without atproto, sub not a DID...).
    case tokenResponseInvalid(String)
    /// The issuer that granted the tokens is not the authorization server of the account's PDS.
    case issuerNotAuthoritative(issuer: String, expected: String)
    /// The authorization server refused a request (PAR, token).
    case serverRefused(String)
    /// A server needed to finish the login (the token endpoint, the account's PDS, its DID
    /// directory) could not be reached or failed: nothing was stored; trying again may work.
    case serverUnavailable(String)
    /// The loopback listener for the redirect could not be opened (a fixed port in use).
    case callbackListenerUnavailable(String)
    case timedOut
    case cancelled
    /// The login took longer than the server allows.
    case expired

    public var name: String {
        switch self {
        case .loginNotFound: "OAuthLoginNotFound"
        case .invalidIdentifier: "OAuthInvalidIdentifier"
        case .metadataInvalid: "OAuthMetadataInvalid"
        case .stateUnknown: "OAuthStateUnknown"
        case .stateReused: "OAuthStateReused"
        case .issuerMismatch: "OAuthIssuerMismatch"
        case .callbackInvalid: "OAuthCallbackInvalid"
        case .authorizationDenied: "OAuthAuthorizationDenied"
        case .subjectMismatch: "OAuthSubjectMismatch"
        case .tokenResponseInvalid: "OAuthTokenResponseInvalid"
        case .issuerNotAuthoritative: "OAuthIssuerNotAuthoritative"
        case .serverRefused: "OAuthServerRefused"
        case .serverUnavailable: "OAuthServerUnavailable"
        case .callbackListenerUnavailable: "OAuthCallbackListenerUnavailable"
        case .timedOut: "OAuthLoginTimeout"
        case .cancelled: "OAuthLoginCancelled"
        case .expired: "OAuthLoginExpired"
        }
    }

    public var message: String {
        switch self {
        case .loginNotFound(let id): "no OAuth login in progress has the id \(id)"
        case .invalidIdentifier(let text): "'\(text)' is neither a handle, a DID nor an http(s) URL"
        case .metadataInvalid(let reason): "the server's OAuth metadata is unusable: \(reason)"
        case .stateUnknown: "the redirect's state matches no login in progress"
        case .stateReused: "the redirect's state was already used: this login link was opened twice"
        case .issuerMismatch(let expected, let actual):
            "the redirect comes from issuer \(actual), but the login was started with \(expected)"
        case .callbackInvalid(let reason): "the redirect is unusable: \(reason)"
        case .authorizationDenied(let reason): "the authorization was refused: \(reason)"
        case .subjectMismatch(let expected, let actual): "the server logged in \(actual), not \(expected)"
        case .tokenResponseInvalid(let reason): "the token answer is unusable: \(reason)"
        case .issuerNotAuthoritative(let issuer, let expected):
            "the tokens come from \(issuer), but the account's PDS trusts only \(expected)"
        case .serverRefused(let reason): "the authorization server refused: \(reason)"
        case .serverUnavailable(let reason): "a server the login needs could not be reached or failed: \(reason); nothing was stored, try again later"
        case .callbackListenerUnavailable(let reason): "cannot listen for the browser's redirect: \(reason)"
        case .timedOut: "nobody completed the login in time"
        case .cancelled: "the login was cancelled"
        case .expired: "the login took too long; start it again"
        }
    }

    /// A verdict on the issuer itself (not a server being unreachable): its metadata breaks the
    /// rules, or it is not the account's authorization server.
    var isIssuerVerdict: Bool {
        switch self {
        case .issuerNotAuthoritative, .metadataInvalid: true
        default: false
        }
    }

    /// The callback rules of `PendingAuthorizations`, each mapped to its own failure.
    init(_ error: CallbackError) {
        switch error {
        case .unknownState, .missingState: self = .stateUnknown
        case .stateAlreadyUsed: self = .stateReused
        case .expired: self = .expired
        case .issuerMismatch(let expected, let actual): self = .issuerMismatch(expected: expected, actual: actual)
        case .authorizationFailed: self = .authorizationDenied(error.description)
        case .malformedQuery, .duplicateParameter, .missingIssuer, .missingCode: self = .callbackInvalid(error.description)
        }
    }

    /// A failed code exchange, with token-rule failures told apart.
    init(exchange error: OAuthClientError) {
        switch error {
        case .invalidTokenResponse(.subjectMismatch(let expected, let actual)):
            self = .subjectMismatch(expected: expected, actual: actual)
        case .invalidTokenResponse(let rule): self = .tokenResponseInvalid(rule.description)
        default: self = error.isTransient ? .serverUnavailable(error.description) : .serverRefused(error.description)
        }
    }
}
