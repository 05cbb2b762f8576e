import AccountStoreCore
import Foundation
import Logging
import RPCServer
import ServiceLifecycle
import XRPCGateway

/// The servers besides the main sockets: the `[[client]]` sockets, the metrics listeners, and
/// the gateway's token file.
extension Daemon {
    /// Each client's JSON-RPC and gateway sockets, held to its policy.
    func clientServers(methods: DaemonMethods, routes: GatewayRoutes,
                       gatewayConfiguration: GatewayServer.Configuration) throws(DaemonStartupError) -> [any Service] {
        var services: [any Service] = []
        var paths = Set([configuration.socketPath, configuration.gatewaySocketPath, configuration.metricsSocketPath].compactMap { $0 })
        for client in configuration.clients {
            let policy = client.clientPolicy
            for path in [client.socket, client.gatewaySocket].compactMap({ $0 }) {
                guard paths.insert(path).inserted else {
                    throw DaemonStartupError("[[client]] '\(client.name)': the socket \(path) is already another socket's",
                                             exitCode: .configuration)
                }
            }
            let socket: DaemonListener?
            let gatewaySocket: DaemonListener?
            do {
                socket = try clientListener(named: client.name, path: client.socket)
                gatewaySocket = try clientListener(named: client.gatewayDescriptorName, path: client.gatewaySocket)
            } catch {
                throw DaemonStartupError(String(describing: error))
            }
            if let socket {
                var restricted = methods
                restricted.client = policy
                let server = RPCServer(
                    listener: socket.listener,
                    configuration: .init(maxLineBytes: configuration.maxLineBytes,
                                         maxConcurrentRequestsPerConnection: configuration.maxRequestsPerConnection),
                    handler: restricted, logger: logger)
                services.append(ClientSocketService(server: server))
            }
            if let gatewaySocket {
                var restricted = routes
                restricted.client = policy
                services.append(GatewayService(server: GatewayServer(
                    listener: .unix(gatewaySocket.listener), configuration: gatewayConfiguration, handler: restricted,
                    logger: logger)))
            }
            logger.info("client sockets", metadata: [
                "client": "\(client.name)", "socket": "\(socket?.path ?? "none")", "gatewaySocket": "\(gatewaySocket?.path ?? "none")",
                "policy": "\(policy.grant?.description ?? "(every call)")",
                "accounts": "\(client.accounts?.joined(separator: ",") ?? "all")",
            ])
        }
        return services
    }

    /// With a loopback TCP gateway: a token in a 0600 file beside the socket, for clients whose
    /// uid the kernel's socket table cannot show (in another network namespace, say); it
    /// allows what the daemon's user may do, and is replaced at every start.
    func writeGatewayTokenFile(tokens: GatewayTokens) throws(DaemonStartupError) -> String? {
        guard configuration.gatewayListen != nil else { return nil }
        let directory = PrivateFiles.directory(of: configuration.socketPath)
        let path = (directory as NSString).appendingPathComponent("gateway.token")
        do {
            // The sockets' directory (0700), which the servers would make a moment later.
            try PrivateFiles.ensureDirectory(directory)
        } catch {
            throw DaemonStartupError("cannot write the gateway token file \(path): \(error)")
        }
        do {
            try PrivateFiles.replace(path, with: Array((tokens.issue(.unrestricted) + "\n").utf8))
        } catch {
            throw DaemonStartupError("cannot write the gateway token file \(path): \(error)")
        }
        return path
    }
}

/// Serves one `[[client]]` JSON-RPC socket; stops accepting with the others.
struct ClientSocketService: Service {
    let server: RPCServer

    func run() async throws {
        try await cancelWhenGracefulShutdown { try await server.run() }
    }
}

extension Daemon {
    /// Prometheus text on a socket of its own (the daemon's user only, like the others), and
    /// on a loopback port when `metrics_listen` is set (any local user: the totals are no secret;
    /// per-account series name DIDs, which are public).
    func metricsServers(_ metrics: DaemonMetrics?, environment: SessionEnvironment,
                        gatewayConfiguration: GatewayServer.Configuration) -> [GatewayServer] {
        guard let metrics else { return [] }
        let routes = MetricsRoutes(metrics: metrics, environment: environment, perAccount: configuration.metricsPerAccount)
        var servers: [GatewayServer] = []
        if let path = configuration.metricsSocketPath {
            servers.append(GatewayServer(listener: .unix(.path(path)), configuration: gatewayConfiguration, handler: routes,
                                         logger: logger))
        }
        if let address = configuration.metricsListen {
            var open = gatewayConfiguration
            open.anyUser = true
            servers.append(GatewayServer(listener: .loopback(host: address.host, port: address.port), configuration: open,
                                         handler: routes, logger: logger))
        }
        return servers
    }
}
