import JSONRPC

/// What bskyctl was doing when an RPC error came back, so the error line can name it.
public struct RequestContext: Sendable, Equatable {
    /// The `account` the user named (UUID, DID or handle), if any.
    public var account: String?
    /// The handle or DID being logged in with (`accounts.add`).
    public var identifier: String?

    public init(account: String? = nil, identifier: String? = nil) {
        self.account = account
        self.identifier = identifier
    }
}

extension CtlFailure {
    /// Turns a JSON-RPC error reply into one friendly line and an exit status.
    ///
    /// The line is built from the stable `data.name` (see docs/PROTOCOL.md); unknown names fall
    /// back to the daemon's own message, which is already meant for people.
    public static func from(_ error: RPCError, context: RequestContext = RequestContext()) -> CtlFailure {
        CtlFailure(friendlyMessage(for: error, context: context), status: exitStatus(for: error))
    }

    /// The exit status for an RPC error: 77 for PermissionDenied, 69 for ShuttingDown, 64 when
    /// the daemon found the arguments bad (InvalidParams: a bad NSID, handle or input), else 1.
    public static func exitStatus(for error: RPCError) -> ExitStatus {
        switch error.name {
        case "PermissionDenied": .permissionDenied
        case "ShuttingDown": .daemonUnavailable
        case "InvalidParams": .usage
        default: .requestFailed
        }
    }

    /// The line shown for an RPC error (without the `bskyctl: ` prefix).
    public static func friendlyMessage(for error: RPCError, context: RequestContext = RequestContext()) -> String {
        let reason = error.data["reason"]?.stringValue?.singleLine
        let because = reason.map { ": \($0)" } ?? ""
        switch error.name {
        case "AccountNotFound":
            if let account = context.account { return "no account matches '\(account)'" }
            return "no account matches: \(error.message)"
        case "NoDefaultAccount":
            return "no account was named and there is no default account; name one, or choose a default with: bskyctl use <account>"
        case "NeedsLogin":
            let who = needsLoginName(error: error, context: context)
            return "account \(who) needs to log in again\(because); run: bskyctl login \(who) (add --app-password for an app-password account)"
        case "AuthFactorTokenRequired":
            return "the server emailed a sign-in code; run bskyctl login in a terminal to enter it, or pass --auth-factor-token-file FILE"
        case "AuthenticationFailed":
            let who = context.identifier.map { " for '\($0)'" } ?? ""
            return "login failed\(who): wrong identifier or app password\(because)"
        case "IdentityResolutionFailed":
            let who = context.identifier ?? context.account
            return "could not resolve \(who.map { "'\($0)'" } ?? "the handle or DID")\(because)"
        case "UpstreamUnavailable":
            if let identifier = context.identifier {
                // A login: no account was stored or changed, and the server may be the
                // authorization server rather than the PDS.
                return "could not log in '\(identifier)': a server could not be reached or failed\(because); nothing was changed, try again later"
            }
            let wait = error.data["retryAfter"]?.intValue.map { "; the next try is in \($0) s (bskyctl refresh --force tries now)" } ?? ""
            return "the account's server could not be reached or failed\(because); the account is kept\(wait)"
        case "AccountExists":
            let existing = existingAccountID(error.data["account"]).map { " as account \($0)" } ?? ""
            return "that account is already registered\(existing); remove it first with: bskyctl logout <account>"
        case "ShuttingDown":
            return "blueskyd is shutting down; try again once it is running"
        case "PermissionDenied":
            return "permission denied: this blueskyd serves only its own user"
        case "MethodNotFound":
            let method = error.data["method"]?.stringValue
            return method.map { "blueskyd has no method '\($0)'" } ?? error.message
        case "InternalError":
            return "\(error.message) (a bug in blueskyd: please report it)"
        default:
            return error.message
        }
    }

    private static func needsLoginName(error: RPCError, context: RequestContext) -> String {
        // Prefer a handle the daemon names, then what the user typed, then a placeholder.
        if let handle = error.data["handle"]?.stringValue { return handle }
        if let handle = error.data["account"]?["handle"]?.stringValue { return handle }
        return context.account ?? "<handle>"
    }

    private static func existingAccountID(_ value: JSONValue?) -> String? {
        guard let value else { return nil }
        return value.stringValue ?? value["id"]?.stringValue
    }
}
