import Foundation
import JSONRPC

/// Everything a daemon method can fail with, each mapped onto one stable JSON-RPC error of the
/// catalogue (`DaemonErrorName`, which holds the codes, data fields and messages).
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
    /// A client's policy refused the call: its name, the rule, the permission needed.
    case policyDenied(client: String, rule: String, permission: String)
    /// The server refused the call for a scope the OAuth session lacks.
    case scopeMissing(account: UUID, scope: String, reason: String)

    public var description: String { rpcError.message }

    /// Whole seconds to wait, rounded up so that a client waiting that long finds the wait over.
    static func seconds(_ interval: TimeInterval) -> Int { max(0, Int(interval.rounded(.up))) }

    public var rpcError: RPCError {
        switch self {
        case .accountNotFound(let ref):
            RPCError(.accountNotFound, [.account: .string(ref)])
        case .noDefaultAccount:
            RPCError(.noDefaultAccount)
        case .needsLogin(let id, let reason):
            RPCError(.needsLogin, [.account: .string(id.uuidString.lowercased()), .reason: .string(reason)])
        case .authFactorTokenRequired(let message):
            RPCError(.authFactorTokenRequired, [.detail: .string(message)])
        case .authenticationFailed(let reason):
            RPCError(.authenticationFailed, [.reason: .string(reason)])
        case .identityResolutionFailed(let reason):
            RPCError(.identityResolutionFailed, [.reason: .string(reason)])
        case .upstreamUnavailable(let reason, let retryAfter):
            RPCError(.upstreamUnavailable, [.reason: .string(reason)]
                .merging(retryAfter.map { [.retryAfter: .number(Double(Self.seconds($0)))] } ?? [:]) { $1 })
        case .accountExists(let id):
            RPCError(.accountExists, [.account: .string(id.uuidString.lowercased())])
        case .invalidParams(let detail, let field):
            .invalidParams(detail, field: field)
        case .shuttingDown:
            .shuttingDown
        case .methodNotFound(let method):
            .methodNotFound(method)
        case .internalError(let detail):
            .internalError(detail)
        case .oauthLogin(let failure):
            failure.rpcError
        case .alreadySubscribed:
            RPCError(.alreadySubscribed)
        case .notConfidentialClient:
            RPCError(.notConfidentialClient)
        case .policyDenied(let client, let rule, let permission):
            RPCError(.policyDenied, [.client: .string(client), .rule: .string(rule), .permission: .string(permission)])
        case .scopeMissing(let account, let scope, let reason):
            RPCError(.scopeMissing, [.account: .string(account.uuidString.lowercased()), .scope: .string(scope),
                                     .reason: .string(reason)])
        }
    }
}
