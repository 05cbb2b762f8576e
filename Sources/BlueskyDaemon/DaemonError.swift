import Foundation
import JSONRPC

/// Everything a daemon method can fail with, each mapped onto one stable JSON-RPC error.
public enum DaemonError: Error, Sendable, CustomStringConvertible {
    case accountNotFound(String)
    case noDefaultAccount
    case needsLogin(account: UUID, reason: String)
    case authFactorTokenRequired(String)
    case authenticationFailed(String)
    case identityResolutionFailed(String)
    /// A server (or the store) cannot be used now; `retryAfter`: seconds until the account's
    /// next try, when it waits in a backoff.
    case upstreamUnavailable(String, retryAfter: TimeInterval? = nil)
    case accountExists(UUID)
    case invalidParams(String, field: String?)
    case shuttingDown
    case methodNotFound(String)
    case internalError(String)
    /// An OAuth login failed; the failure carries its own stable name.
    case oauthLogin(OAuthLoginFailure)
    /// A request about the confidential client's keys while blueskyd is not one.
    case notConfidentialClient
    /// `events.subscribe` on a connection that already streams events.
    case alreadySubscribed

    public var description: String { rpcError.message }

    /// Whole seconds to wait, rounded up so that a client waiting that long finds the wait over.
    static func seconds(_ interval: TimeInterval) -> Int { max(0, Int(interval.rounded(.up))) }

    public var rpcError: RPCError {
        switch self {
        case .accountNotFound(let ref):
            RPCError(code: -32001, name: "AccountNotFound", message: "no account matches '\(ref)'",
                     extra: ["account": .string(ref)])
        case .noDefaultAccount:
            RPCError(code: -32002, name: "NoDefaultAccount",
                     message: "no account was named and there is no default account")
        case .needsLogin(let id, let reason):
            RPCError(code: -32003, name: "NeedsLogin",
                     message: "account \(id.uuidString.lowercased()) needs a new login: \(reason)",
                     extra: ["account": .string(id.uuidString.lowercased()), "reason": .string(reason)])
        case .authFactorTokenRequired(let message):
            RPCError(code: -32004, name: "AuthFactorTokenRequired",
                     message: "the server sent a sign-in code by email; call again with authFactorToken (\(message))")
        case .authenticationFailed(let reason):
            RPCError(code: -32005, name: "AuthenticationFailed", message: "login refused: \(reason)",
                     extra: ["reason": .string(reason)])
        case .identityResolutionFailed(let reason):
            RPCError(code: -32006, name: "IdentityResolutionFailed", message: "cannot resolve identity: \(reason)",
                     extra: ["reason": .string(reason)])
        case .upstreamUnavailable(let reason, let retryAfter):
            RPCError(code: -32007, name: "UpstreamUnavailable",
                     message: "the server is unavailable: \(reason)" + (retryAfter.map { "; next try in \(Self.seconds($0)) s" } ?? ""),
                     extra: retryAfter.map { ["reason": .string(reason), "retryAfter": .number(Double(Self.seconds($0)))] }
                         ?? ["reason": .string(reason)])
        case .accountExists(let id):
            RPCError(code: -32008, name: "AccountExists",
                     message: "that account is already registered as \(id.uuidString.lowercased())",
                     extra: ["account": .string(id.uuidString.lowercased())])
        case .invalidParams(let detail, let field):
            .invalidParams(detail, field: field)
        case .shuttingDown:
            RPCError(code: -32009, name: "ShuttingDown", message: "blueskyd is shutting down")
        case .methodNotFound(let method):
            .methodNotFound(method)
        case .internalError(let detail):
            .internalError(detail)
        case .oauthLogin(let failure):
            RPCError(code: -32010, name: failure.name, message: failure.message)
        case .alreadySubscribed:
            RPCError(code: -32012, name: "AlreadySubscribed",
                     message: "this connection is already subscribed to events; call events.unsubscribe first")
        case .notConfidentialClient:
            RPCError(code: -32011, name: "NotConfidentialClient",
                     message: "blueskyd is not configured as a confidential OAuth client (oauth_client_auth = \"private_key_jwt\"), so it has no signing key")
        }
    }
}
