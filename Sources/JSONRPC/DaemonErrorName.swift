/// Every error blueskyd can answer with, by its stable `data.name`: the one catalogue the daemon
/// builds its errors from and bskyctl reads them with (docs/PROTOCOL.md, "Errors", lists the
/// same names; a test holds the two together).
///
/// Scripts match on the raw values, the codes and the `data` fields: none of them may change.
/// The messages are for people and may be reworded.
public enum DaemonErrorName: String, Sendable, CaseIterable, Hashable {
    // JSON-RPC's own errors, and the socket's refusal.
    case parseError = "ParseError"
    case invalidRequest = "InvalidRequest"
    case lineTooLong = "LineTooLong"
    case emptyBatch = "EmptyBatch"
    case methodNotFound = "MethodNotFound"
    case invalidParams = "InvalidParams"
    case internalError = "InternalError"
    case permissionDenied = "PermissionDenied"

    // blueskyd's accounts and servers.
    case accountNotFound = "AccountNotFound"
    case noDefaultAccount = "NoDefaultAccount"
    case needsLogin = "NeedsLogin"
    case authFactorTokenRequired = "AuthFactorTokenRequired"
    case authenticationFailed = "AuthenticationFailed"
    case identityResolutionFailed = "IdentityResolutionFailed"
    case upstreamUnavailable = "UpstreamUnavailable"
    case accountExists = "AccountExists"
    case shuttingDown = "ShuttingDown"
    case notConfidentialClient = "NotConfidentialClient"
    case alreadySubscribed = "AlreadySubscribed"
    /// A client's policy does not allow the call (a restricted socket or gateway token).
    case policyDenied = "PolicyDenied"
    /// The server refused the call for a scope the account's OAuth session lacks.
    case scopeMissing = "ScopeMissing"

    // OAuth logins that failed (all code -32010).
    case oauthLoginNotFound = "OAuthLoginNotFound"
    case oauthInvalidIdentifier = "OAuthInvalidIdentifier"
    case oauthMetadataInvalid = "OAuthMetadataInvalid"
    case oauthStateUnknown = "OAuthStateUnknown"
    case oauthStateReused = "OAuthStateReused"
    case oauthIssuerMismatch = "OAuthIssuerMismatch"
    case oauthCallbackInvalid = "OAuthCallbackInvalid"
    case oauthAuthorizationDenied = "OAuthAuthorizationDenied"
    case oauthSubjectMismatch = "OAuthSubjectMismatch"
    case oauthTokenResponseInvalid = "OAuthTokenResponseInvalid"
    case oauthIssuerNotAuthoritative = "OAuthIssuerNotAuthoritative"
    case oauthServerRefused = "OAuthServerRefused"
    case oauthServerUnavailable = "OAuthServerUnavailable"
    case oauthCallbackListenerUnavailable = "OAuthCallbackListenerUnavailable"
    case oauthLoginTimeout = "OAuthLoginTimeout"
    case oauthLoginCancelled = "OAuthLoginCancelled"
    case oauthLoginExpired = "OAuthLoginExpired"

    /// A value an error is built from. Those that are `isData` are sent in `data` under their
    /// raw value; the others only shape the message (sending them would widen the protocol).
    public enum Field: String, Sendable, CaseIterable, Hashable {
        /// The account named (as given, or its UUID).
        case account
        /// Why: usually a server's own words.
        case reason
        /// Whole seconds until the account's next try, while it waits in a backoff.
        case retryAfter
        /// The JSON-RPC method that does not exist.
        case method
        /// The parameter that is wrong, when one is.
        case field
        /// A detail for the message only.
        case detail
        /// The longest line the server reads, in bytes.
        case limit
        /// The id of an OAuth login.
        case loginID
        /// What the user typed to name an account.
        case identifier
        /// What a login expected (an issuer, a DID) and what it found instead.
        case expected, actual
        /// The issuer that granted an OAuth login's tokens.
        case issuer
        /// The client a policy belongs to (its `[[client]]` name, or the program of a gateway token).
        case client
        /// The part of the policy that refused: `policy = "…"` or `accounts = […]`.
        case rule
        /// The permission the call needed, in atproto's syntax.
        case permission
        /// The OAuth scope a server said the session lacks.
        case scope

        /// Whether the field is sent in the error's `data`.
        public var isData: Bool {
            switch self {
            case .account, .reason, .retryAfter, .method, .field, .client, .rule, .permission, .scope: true
            case .detail, .limit, .loginID, .identifier, .expected, .actual, .issuer: false
            }
        }
    }

    /// The JSON-RPC error code.
    public var code: Int {
        switch self {
        case .parseError: -32700
        case .invalidRequest, .lineTooLong, .emptyBatch: -32600
        case .methodNotFound: -32601
        case .invalidParams: -32602
        case .internalError: -32603
        case .permissionDenied: -32000
        case .accountNotFound: -32001
        case .noDefaultAccount: -32002
        case .needsLogin: -32003
        case .authFactorTokenRequired: -32004
        case .authenticationFailed: -32005
        case .identityResolutionFailed: -32006
        case .upstreamUnavailable: -32007
        case .accountExists: -32008
        case .shuttingDown: -32009
        case .notConfidentialClient: -32011
        case .alreadySubscribed: -32012
        case .policyDenied: -32013
        case .scopeMissing: -32014
        case .oauthLoginNotFound, .oauthInvalidIdentifier, .oauthMetadataInvalid, .oauthStateUnknown,
             .oauthStateReused, .oauthIssuerMismatch, .oauthCallbackInvalid, .oauthAuthorizationDenied,
             .oauthSubjectMismatch, .oauthTokenResponseInvalid, .oauthIssuerNotAuthoritative, .oauthServerRefused,
             .oauthServerUnavailable, .oauthCallbackListenerUnavailable, .oauthLoginTimeout, .oauthLoginCancelled,
             .oauthLoginExpired: -32010
        }
    }

    /// Whether this is one of the failed-OAuth-login names.
    public var isOAuthLogin: Bool { code == -32010 }

    /// Every value the message is built from, in the order a builder would give them.
    public var fields: [Field] {
        switch self {
        case .parseError, .invalidRequest, .internalError, .authFactorTokenRequired: [.detail]
        case .lineTooLong: [.limit]
        case .methodNotFound: [.method]
        case .invalidParams: [.detail, .field]
        case .accountNotFound, .accountExists: [.account]
        case .needsLogin: [.account, .reason]
        case .authenticationFailed, .identityResolutionFailed: [.reason]
        case .policyDenied: [.client, .rule, .permission]
        case .scopeMissing: [.account, .scope, .reason]
        case .upstreamUnavailable: [.reason, .retryAfter]
        case .oauthLoginNotFound: [.loginID]
        case .oauthInvalidIdentifier: [.identifier]
        case .oauthIssuerMismatch, .oauthSubjectMismatch: [.expected, .actual]
        case .oauthIssuerNotAuthoritative: [.issuer, .expected]
        case .oauthMetadataInvalid, .oauthCallbackInvalid, .oauthAuthorizationDenied, .oauthTokenResponseInvalid,
             .oauthServerRefused, .oauthServerUnavailable, .oauthCallbackListenerUnavailable: [.detail]
        case .emptyBatch, .permissionDenied, .noDefaultAccount, .shuttingDown, .notConfidentialClient,
             .alreadySubscribed, .oauthStateUnknown, .oauthStateReused, .oauthLoginTimeout, .oauthLoginCancelled,
             .oauthLoginExpired: []
        }
    }

    /// The fields sent in `data` besides `name`.
    public var dataFields: [Field] { fields.filter(\.isData) }

    /// Data fields sent only when known; every other data field is always sent.
    public var optionalDataFields: Set<Field> {
        switch self {
        case .invalidParams: [.field]
        case .upstreamUnavailable: [.retryAfter]
        default: []
        }
    }

    /// The status a command-line client (bskyctl) exits with on this error, after sysexits(3):
    /// 77 (EX_NOPERM) for another user's daemon, 69 (EX_UNAVAILABLE) for a stopping daemon, 64
    /// (EX_USAGE) for arguments the daemon found bad, else 1: the request failed.
    public var exitStatus: Int32 {
        switch self {
        case .permissionDenied, .policyDenied: 77
        case .shuttingDown: 69
        case .invalidParams: 64
        default: 1
        }
    }
}

extension RPCError {
    /// The error `name` from the catalogue: its code, the message built from `values`, and the
    /// values that are data fields in `data` (the others are dropped once in the message).
    public init(_ name: DaemonErrorName, _ values: [DaemonErrorName.Field: JSONValue] = [:]) {
        var extra: [String: JSONValue] = [:]
        for field in name.dataFields {
            if let value = values[field] { extra[field.rawValue] = value }
        }
        self.init(code: name.code, name: name.rawValue, message: name.message(values), extra: extra)
    }

    /// The catalogue's entry for `data.name`; nil for a name this build does not know (a newer
    /// daemon's, or a reply without a name).
    public var catalogueName: DaemonErrorName? { DaemonErrorName(rawValue: name) }

    /// A data field's value, as sent.
    public subscript(field: DaemonErrorName.Field) -> JSONValue? { data[field.rawValue] }
}
