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

    /// The catalogue's name for this failure (all share code -32010).
    public var errorName: DaemonErrorName {
        switch self {
        case .loginNotFound: .oauthLoginNotFound
        case .invalidIdentifier: .oauthInvalidIdentifier
        case .metadataInvalid: .oauthMetadataInvalid
        case .stateUnknown: .oauthStateUnknown
        case .stateReused: .oauthStateReused
        case .issuerMismatch: .oauthIssuerMismatch
        case .callbackInvalid: .oauthCallbackInvalid
        case .authorizationDenied: .oauthAuthorizationDenied
        case .subjectMismatch: .oauthSubjectMismatch
        case .tokenResponseInvalid: .oauthTokenResponseInvalid
        case .issuerNotAuthoritative: .oauthIssuerNotAuthoritative
        case .serverRefused: .oauthServerRefused
        case .serverUnavailable: .oauthServerUnavailable
        case .callbackListenerUnavailable: .oauthCallbackListenerUnavailable
        case .timedOut: .oauthLoginTimeout
        case .cancelled: .oauthLoginCancelled
        case .expired: .oauthLoginExpired
        }
    }

    /// What the catalogue builds this failure's message from.
    private var values: [DaemonErrorName.Field: JSONValue] {
        switch self {
        case .loginNotFound(let id): [.loginID: .string(id)]
        case .invalidIdentifier(let text): [.identifier: .string(text)]
        case .issuerMismatch(let expected, let actual), .subjectMismatch(let expected, let actual):
            [.expected: .string(expected), .actual: .string(actual)]
        case .issuerNotAuthoritative(let issuer, let expected): [.issuer: .string(issuer), .expected: .string(expected)]
        case .metadataInvalid(let detail), .callbackInvalid(let detail), .authorizationDenied(let detail),
             .tokenResponseInvalid(let detail), .serverRefused(let detail), .serverUnavailable(let detail),
             .callbackListenerUnavailable(let detail):
            [.detail: .string(detail)]
        case .stateUnknown, .stateReused, .timedOut, .cancelled, .expired: [:]
        }
    }

    /// The stable `data.name`.
    public var name: String { errorName.rawValue }

    /// The message, as the error carries it (also shown on the browser's redirect page).
    public var message: String { errorName.message(values) }

    /// The JSON-RPC error this failure is answered with.
    public var rpcError: RPCError { RPCError(errorName, values) }

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
