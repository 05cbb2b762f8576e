extension DaemonErrorName {
    /// The one-line message for people, built from the values `fields` lists (a missing value
    /// reads as empty, so a message is always whole).
    ///
    /// This is the daemon's wording; bskyctl prints it as sent and adds only what a terminal
    /// user needs besides (which command to run next).
    public func message(_ values: [Field: JSONValue] = [:]) -> String {
        func text(_ field: Field) -> String {
            guard let value = values[field] else { return "" }
            return value.stringValue ?? value.intValue.map(String.init) ?? String(decoding: value.encoded(), as: UTF8.self)
        }
        switch self {
        case .parseError: return "parse error: \(text(.detail))"
        case .invalidRequest: return "invalid request: \(text(.detail))"
        case .lineTooLong:
            return "invalid request: the line is longer than \(text(.limit)) bytes (blueskyd's max_line_bytes)"
        case .emptyBatch: return "invalid request: an empty batch holds no requests"
        case .methodNotFound: return "no such method: \(text(.method))"
        case .invalidParams: return "invalid params: \(text(.detail))"
        case .internalError: return "internal error: \(text(.detail))"
        case .permissionDenied: return "permission denied: this blueskyd serves only its own user"
        case .accountNotFound: return "no account matches '\(text(.account))'"
        case .noDefaultAccount: return "no account was named and there is no default account"
        case .needsLogin: return "account \(text(.account)) needs a new login: \(text(.reason))"
        case .authFactorTokenRequired:
            return "the server sent a sign-in code by email; call again with authFactorToken (\(text(.detail)))"
        case .authenticationFailed: return "login refused: \(text(.reason))"
        case .identityResolutionFailed: return "cannot resolve identity: \(text(.reason))"
        case .upstreamUnavailable:
            let wait = values[.retryAfter] == nil ? "" : "; the next try is in \(text(.retryAfter)) s"
            return "the server is unavailable: \(text(.reason))\(wait)"
        case .accountExists: return "that account is already registered as \(text(.account))"
        case .shuttingDown: return "blueskyd is shutting down"
        case .notConfidentialClient:
            return "blueskyd is not configured as a confidential OAuth client (oauth_client_auth = \"private_key_jwt\"), so it has no signing key"
        case .alreadySubscribed:
            return "this connection is already subscribed to events; call events.unsubscribe first"
        case .policyDenied:
            return "client \(text(.client)) may not make this call: it needs \(text(.permission)), which its \(text(.rule)) does not allow"
        case .scopeMissing:
            return "account \(text(.account)) lacks the OAuth scope \(text(.scope)) (\(text(.reason))); add it with: bskyctl login --upgrade \(text(.account)) --scope '+\(text(.scope))'"
        case .oauthLoginNotFound: return "no OAuth login in progress has the id \(text(.loginID))"
        case .oauthInvalidIdentifier: return "'\(text(.identifier))' is neither a handle, a DID nor an http(s) URL"
        case .oauthMetadataInvalid: return "the server's OAuth metadata is unusable: \(text(.detail))"
        case .oauthStateUnknown: return "the redirect's state matches no login in progress"
        case .oauthStateReused: return "the redirect's state was already used: this login link was opened twice"
        case .oauthIssuerMismatch:
            return "the redirect comes from issuer \(text(.actual)), but the login was started with \(text(.expected))"
        case .oauthCallbackInvalid: return "the redirect is unusable: \(text(.detail))"
        case .oauthAuthorizationDenied: return "the authorization was refused: \(text(.detail))"
        case .oauthSubjectMismatch: return "the server logged in \(text(.actual)), not \(text(.expected))"
        case .oauthTokenResponseInvalid: return "the token answer is unusable: \(text(.detail))"
        case .oauthIssuerNotAuthoritative:
            return "the tokens come from \(text(.issuer)), but the account's PDS trusts only \(text(.expected))"
        case .oauthServerRefused: return "the authorization server refused: \(text(.detail))"
        case .oauthServerUnavailable:
            return "a server the login needs could not be reached or failed: \(text(.detail)); nothing was stored, try again later"
        case .oauthCallbackListenerUnavailable: return "cannot listen for the browser's redirect: \(text(.detail))"
        case .oauthLoginTimeout: return "nobody completed the login in time"
        case .oauthLoginCancelled: return "the login was cancelled"
        case .oauthLoginExpired: return "the login took too long; start it again"
        }
    }
}
