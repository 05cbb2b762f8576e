import AccountStoreCore
import ATPermissions
import Foundation
import JSONRPC
import RPCServer

/// `gateway.issueToken` and `gateway.revokeToken`: the local tokens `bskyctl exec` gives a
/// program for the XRPC gateway (docs/PROTOCOL.md).
extension DaemonMethods {
    func gatewayToken(_ method: String, _ params: Params, context: RPCCallContext) async throws(DaemonError) -> JSONValue {
        switch method {
        case "gateway.issueToken":
            try params.allowOnly(["policy", "accounts", "program"])
            let program = try params.optionalString("program") ?? "program"
            let names = try params.value("accounts").map { value throws(DaemonError) -> [String] in
                guard case .array(let items) = value, !items.isEmpty,
                      case let strings = items.compactMap(\.stringValue), strings.count == items.count else {
                    throw .invalidParams("accounts must be a non-empty array of UUIDs, DIDs or handles", field: "accounts")
                }
                return strings
            }
            let text = try params.optionalString("policy")
            let policy: ClientPolicy
            do throws(PermissionSyntaxError) {
                policy = try ClientPolicy.parse(name: "exec:\(program)", policy: text, accounts: names)
            } catch {
                throw .invalidParams(error.description, field: "policy")
            }
            guard let connection = context.streams else {
                throw .internalError("this connection cannot hold a token (no connection to tie it to)")
            }
            // Each named account must exist now: a typo is an error, not a token for nothing.
            for name in names ?? [] { _ = try accounts.registry.session(name) }
            // The program's own socket, where its policy holds whether it sends the token or not.
            let socket = try await execSockets?.open(for: policy)
            let token = tokens.issue(policy)
            // The token lives as long as this connection: bskyctl holds it open while the program
            // runs, so the token ends when it exits, however it exits (even killed).
            connection.whenClosed { [tokens, execSockets] in
                tokens.revoke(token)
                if let socket { execSockets?.close(socket) }
            }
            logger.info("gateway token issued", metadata: [
                "client": "\(policy.name)", "policy": "\(policy.grant?.description ?? "(none)")",
                "accounts": "\(names?.joined(separator: ",") ?? "any")", "pid": "\(context.peer.pid)",
                "socket": "\(socket ?? "none")",
            ])
            // What `bskyctl exec --sandbox` hides from the program: every directory holding a
            // main socket, the token file, the store or its key.
            let hidden = Set(([info.socketPath, info.gatewaySocketPath, info.metricsSocketPath].compactMap { $0 } + info.clientSocketPaths).map {
                PrivateFiles.directory(of: $0)
            } + [info.stateDirectory]).sorted()
            return [
                "token": .string(token),
                "execSocket": socket.map(JSONValue.string) ?? .null,
                "gatewaySocket": info.gatewaySocketPath.map(JSONValue.string) ?? .null,
                "gatewayURL": info.loopbackGateway.map { .string("http://\($0.boundDescription)") } ?? .null,
                "hidden": .array(hidden.map(JSONValue.string)),
            ]
        case "gateway.revokeToken":
            try params.allowOnly(["token"])
            return ["revoked": .bool(tokens.revoke(try params.requiredString("token")))]
        default:
            throw .methodNotFound(method)
        }
    }
}
