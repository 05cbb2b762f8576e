import AccountStoreCore
import Foundation
import Logging
import RPCServer
import ServiceLifecycle
import Synchronization
import XRPCGateway

/// A gateway socket of its own for each `bskyctl exec` program, bound to its policy.
///
/// The main gateway socket serves the daemon's user, unrestricted; a program handed its path
/// could leave out its token and do anything. So a program gets a socket in a private
/// directory (`<sockets' directory>-exec/<random>/xrpc.sock`, 0700) where every request is held
/// to its policy, token or not; it is removed when the token ends (the program exits, or
/// bskyctl is killed). `bskyctl exec --sandbox` hides the main sockets from the program
/// altogether and leaves it only this one.
///
/// Each socket's server runs in this service's task group: nothing outlives the daemon's stop.
final class ExecSockets: Service, Sendable {
    let base: String
    private let routes: GatewayRoutes
    private let configuration: GatewayServer.Configuration
    private let logger: Logger
    private let opened: AsyncStream<Opened>
    private let opening: AsyncStream<Opened>.Continuation
    private let live = Mutex<[String: GatewayServer]>([:])

    private struct Opened: Sendable {
        let server: GatewayServer
        let directory: String
    }

    /// `socketDirectory`: the main JSON-RPC socket's; the private ones go beside it.
    init(socketDirectory: String, routes: GatewayRoutes, configuration: GatewayServer.Configuration, logger: Logger) {
        var trimmed = socketDirectory
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed.removeLast() }
        base = trimmed + "-exec"
        self.routes = routes
        self.configuration = configuration
        self.logger = logger
        (opened, opening) = AsyncStream.makeStream(of: Opened.self)
    }

    /// A new socket serving `policy`; its path once it listens.
    func open(for policy: ClientPolicy) async throws(DaemonError) -> String {
        var random = SystemRandomNumberGenerator()
        let name = (0..<12).map { _ in String(UInt8.random(in: 0...255, using: &random), radix: 16) }.joined()
        let directory = base + "/" + name
        let path = directory + "/xrpc.sock"
        do {
            try PrivateFiles.ensureDirectory(base)
        } catch {
            throw .internalError("cannot make the directory of exec sockets \(base): \(error)")
        }
        var restricted = routes
        restricted.client = policy
        let server = GatewayServer(listener: .unix(.path(path)), configuration: configuration, handler: restricted, logger: logger)
        live.withLock { $0[path] = server }
        guard case .enqueued = opening.yield(Opened(server: server, directory: directory)) else {
            live.withLock { _ = $0.removeValue(forKey: path) }
            throw .shuttingDown
        }
        do {
            try await server.waitUntilListening()
        } catch {
            close(path)
            throw .internalError("cannot listen on \(path): \(error)")
        }
        return path
    }

    /// Stops serving `path` (its connections finish their request) and removes it.
    func close(_ path: String) {
        live.withLock { $0.removeValue(forKey: path) }?.shutdownGracefully()
    }

    var count: Int { live.withLock { $0.count } }

    func run() async throws {
        // A graceful stop cancels the loop and, with it, each socket's server (which then
        // lets its connections finish their request, as every gateway server does).
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                for await opened in self.opened {
                    group.addTask {
                        do {
                            try await opened.server.run()
                        } catch {
                            self.logger.warning("an exec socket stopped on an error", metadata: ["error": "\(error)"])
                        }
                        try? FileManager.default.removeItem(atPath: opened.directory)
                    }
                }
            }
        }
        // No new sockets after the stop.
        opening.finish()
        live.withLock { $0.removeAll() }
    }
}
