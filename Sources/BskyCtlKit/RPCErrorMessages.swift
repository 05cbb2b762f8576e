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
    /// Turns a JSON-RPC error reply into one line and an exit status.
    ///
    /// The line is the daemon's own message, followed by what only bskyctl can add: the command
    /// to run next. Both are keyed on the catalogue's names (`DaemonErrorName`); a name this
    /// bskyctl does not know (a newer daemon's) shows the message alone.
    public static func from(_ error: RPCError, context: RequestContext = RequestContext()) -> CtlFailure {
        CtlFailure(friendlyMessage(for: error, context: context), status: exitStatus(for: error))
    }

    /// The exit status for an RPC error, from the catalogue: 77 for PermissionDenied, 69 for
    /// ShuttingDown, 64 when the daemon found the arguments bad (InvalidParams), else 1.
    public static func exitStatus(for error: RPCError) -> ExitStatus {
        error.catalogueName.flatMap { ExitStatus(rawValue: $0.exitStatus) } ?? .requestFailed
    }

    /// The line shown for an RPC error (without the `bskyctl: ` prefix): the daemon's message,
    /// then `; ` and bskyctl's hint when it has one.
    public static func friendlyMessage(for error: RPCError, context: RequestContext = RequestContext()) -> String {
        guard let name = error.catalogueName, let hint = hint(for: name, error: error, context: context) else {
            return error.message
        }
        return "\(error.message); \(hint)"
    }

    /// What a terminal user needs besides the daemon's message, which cannot know bskyctl's
    /// commands or what the user typed. Nil when the message says it all.
    static func hint(for name: DaemonErrorName, error: RPCError, context: RequestContext) -> String? {
        switch name {
        case .accountNotFound:
            return "bskyctl accounts lists the accounts"
        case .noDefaultAccount:
            return "name one, or choose a default with: bskyctl use <account>"
        case .needsLogin:
            // What the user typed logs in again; the daemon sends only the account's UUID.
            let who = context.account ?? "<handle>"
            return "run: bskyctl login \(who) (add --app-password for an app-password account)"
        case .authFactorTokenRequired:
            return "bskyctl login asks for it in a terminal, or reads it from --auth-factor-token-file FILE"
        case .authenticationFailed:
            let who = context.identifier.map { " '\($0)'" } ?? ""
            return "check the identifier\(who) and the app password"
        case .identityResolutionFailed:
            return (context.identifier ?? context.account).map { "check the handle or DID '\($0)'" }
        case .upstreamUnavailable:
            if error[.retryAfter] != nil { return "bskyctl refresh --force tries now" }
            // A login stores nothing: try again. Any other call leaves the account as it was, but
            // no blanket "try again": a write whose answer was lost may have been made (the
            // daemon's message says so), and sending it again could make it twice.
            return context.identifier == nil ? "the account is kept" : "nothing was changed, try again later"
        case .accountExists:
            let existing = error[.account]?.stringValue ?? "<account>"
            return "remove it first with: bskyctl logout \(existing)"
        case .shuttingDown:
            return "try again once it is running"
        case .methodNotFound:
            return "bskyctl and blueskyd may be of different versions"
        case .internalError:
            return "a bug in blueskyd: please report it"
        case .notConfidentialClient:
            return "see blueskyd.toml(5)"
        case .policyDenied:
            return "the policy is in blueskyd.toml ([[client]]) or given to bskyctl exec --policy"
        case .oauthLoginTimeout:
            return "start again with: bskyctl login \(context.identifier ?? "<handle>")"
        case .parseError, .invalidRequest, .lineTooLong, .emptyBatch, .invalidParams, .permissionDenied,
             .alreadySubscribed, .scopeMissing, .oauthLoginNotFound, .oauthInvalidIdentifier, .oauthMetadataInvalid,
             .oauthStateUnknown, .oauthStateReused, .oauthIssuerMismatch, .oauthCallbackInvalid,
             .oauthAuthorizationDenied, .oauthSubjectMismatch, .oauthTokenResponseInvalid,
             .oauthIssuerNotAuthoritative, .oauthServerRefused, .oauthServerUnavailable,
             .oauthCallbackListenerUnavailable, .oauthLoginCancelled, .oauthLoginExpired:
            return nil
        }
    }
}
