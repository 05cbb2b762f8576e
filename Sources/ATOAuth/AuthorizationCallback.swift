import Foundation

/// The query of the redirect back to the client (RFC 6749 §4.1.2, RFC 9207): a `code` or an
/// `error`, with `state` and `iss`.
public struct AuthorizationCallback: Sendable, Equatable {
    public var code: String?
    public var state: String?
    public var issuer: String?
    public var error: String?
    public var errorDescription: String?

    public init(code: String? = nil, state: String? = nil, issuer: String? = nil, error: String? = nil,
                errorDescription: String? = nil) {
        self.code = code
        self.state = state
        self.issuer = issuer
        self.error = error
        self.errorDescription = errorDescription
    }

    /// Reads the callback from the redirect URL's query (form-encoded: `+` is a space).
    /// A parameter given twice is refused, as RFC 6749 §3.1 requires.
    public init(redirectURL: URL) throws(CallbackError) {
        guard let components = URLComponents(url: redirectURL, resolvingAgainstBaseURL: false) else {
            throw .malformedQuery
        }
        try self.init(query: components.percentEncodedQuery ?? "")
    }

    /// Reads the callback from a raw query string (without the `?`).
    public init(query: String) throws(CallbackError) {
        guard let fields = FormEncoding.decode(query) else { throw .malformedQuery }
        var values: [String: String] = [:]
        let known: Set<String> = ["code", "state", "iss", "error", "error_description"]
        for field in fields where known.contains(field.name) {
            guard values.updateValue(field.value, forKey: field.name) == nil else { throw .duplicateParameter(field.name) }
        }
        self.init(code: values["code"], state: values["state"], issuer: values["iss"], error: values["error"],
                  errorDescription: values["error_description"])
    }
}

extension AuthorizationCallback: CustomStringConvertible {
    // The code is a short-lived credential: say whether there is one, not what it is.
    public var description: String {
        "AuthorizationCallback(code: \(code == nil ? "none" : "redacted"), state: \(state ?? "none"), "
            + "iss: \(issuer ?? "none"), error: \(error ?? "none"))"
    }
}

/// Why a callback was refused. Each its own case: they mean very different things to a user
/// (they cancelled, the link was stale, or someone tried to inject a code).
public enum CallbackError: Error, Sendable, Equatable, CustomStringConvertible {
    case malformedQuery
    case duplicateParameter(String)
    case missingState
    /// No authorization was started with this state (or it was forgotten, e.g. a restart).
    case unknownState
    /// This state's callback was already received: a replayed or double-submitted redirect.
    case stateAlreadyUsed
    /// The authorization was started too long ago.
    case expired
    case missingIssuer
    case issuerMismatch(expected: String, actual: String)
    /// The server sent an error instead of a code (`access_denied` when the user refused).
    case authorizationFailed(error: String, description: String?)
    case missingCode

    public var description: String {
        switch self {
        case .malformedQuery: "the callback's query is not valid form encoding"
        case .duplicateParameter(let name): "the callback has the parameter \(name) more than once"
        case .missingState: "the callback has no state"
        case .unknownState: "the callback's state matches no login in progress"
        case .stateAlreadyUsed: "the callback's state was already used: this login link was opened twice"
        case .expired: "the login took too long; start it again"
        case .missingIssuer: "the callback has no iss, which the authorization server must send"
        case .issuerMismatch(let expected, let actual):
            "the callback comes from issuer \(actual), but the login was started with \(expected)"
        case .authorizationFailed(let error, let description):
            "the authorization server refused: \(error)" + (description.map { " (\($0))" } ?? "")
        case .missingCode: "the callback has neither a code nor an error"
        }
    }
}
