import Foundation
import Logging
import Synchronization
import NIOCore
import NIOPosix
import RPCServer

/// Plain XRPC over HTTP/1.1 (keep-alive) for programs that speak XRPC, not blueskyd's
/// JSON-RPC: every request is admitted (`GatewayAdmission`) and answered by the handler.
///
/// Binding, draining and the grace period follow `RPCServer`, whose state machine it shares.
public final class GatewayServer: Sendable {
    public struct Configuration: Sendable {
        /// The largest request body taken (a blob upload); a larger one gets 413.
        public var maxRequestBodyBytes: Int = 64 << 20
        /// Only this uid's requests are served.
        public var allowedUID: UInt32 = UInt32(getuid())
        /// How long requests in flight may take to finish after a shutdown begins.
        public var shutdownGracePeriod: Duration = .seconds(5)
        public var eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton

        public init(maxRequestBodyBytes: Int = 64 << 20, allowedUID: UInt32 = UInt32(getuid()),
                    shutdownGracePeriod: Duration = .seconds(5)) {
            self.maxRequestBodyBytes = maxRequestBodyBytes
            self.allowedUID = allowedUID
            self.shutdownGracePeriod = shutdownGracePeriod
        }
    }

    /// Where the gateway listens.
    public enum Listener: Sendable, Hashable, CustomStringConvertible {
        /// A Unix socket: a path it creates, or one systemd passed.
        case unix(RPCServer.Listener)
        /// A loopback TCP address (port 0: any free port), for programs that cannot use a Unix
        /// socket; the client's uid is read from the kernel's socket table.
        case loopback(host: String, port: Int)

        public var description: String {
            switch self {
            case .unix(.path(let path)): path
            case .unix(.inheritedDescriptor(let descriptor)): "inherited descriptor \(descriptor)"
            case .loopback(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
            }
        }
    }

    public let listener: Listener
    public let configuration: Configuration
    let handler: any GatewayHandler
    let logger: Logger
    let state = Mutex(ServerState())
    /// The TCP port bound (a loopback listener), which `Host` must name.
    let boundPort = Mutex<Int?>(nil)

    public init(listener: Listener, configuration: Configuration, handler: some GatewayHandler, logger: Logger) {
        self.listener = listener
        self.configuration = configuration
        self.handler = handler
        self.logger = logger
    }

    var admission: GatewayAdmission {
        GatewayAdmission(allowedUID: configuration.allowedUID, port: boundPort.withLock { $0 })
    }

    /// The listener, with the port actually bound.
    public var boundDescription: String {
        guard case .loopback(let host, _) = listener, let port else { return listener.description }
        return Listener.loopback(host: host, port: port).description
    }

    /// The loopback port listened on, once listening (nil for a Unix socket).
    public var port: Int? { boundPort.withLock { $0 } }

    /// Listens and serves until cancelled or shut down (the socket file as `RPCServer.run()`
    /// makes it: a 0700 directory, a stale socket replaced, the socket 0600).
    public func run() async throws {
        let listening: NIOAsyncChannel<AcceptedGatewayConnection, Never>
        do {
            try state.withLock { try $0.startBinding() }
            listening = try await bind()
        } catch {
            state.withLock { $0.bindingFailed(error) }.forEach { $0.resume(throwing: error) }
            throw error
        }
        let finished = CompletionSignal<(any Error)?>()
        let work = Task { finished.complete(await serveConnections(listening)) }
        let (waiters, shutdownRequested) = state.withLock {
            $0.listening(on: listening.channel, work: work, finished: finished)
        }
        waiters.forEach { $0.resume() }
        logger.info("gateway listening", metadata: ["gateway.listener": "\(boundDescription)"])
        if shutdownRequested { shutdownGracefully() }
        let acceptFailure = await withTaskCancellationHandler {
            await finished.completion()
        } onCancel: {
            shutdownGracefully()
        }
        state.withLock { $0.stopped() }
        logger.info("gateway stopped listening", metadata: ["gateway.listener": "\(listener)"])
        if let acceptFailure { throw acceptFailure }
    }

    /// Stops accepting; each connection ends after the request it is answering (keep-alive
    /// connections idle between requests end at once); after the grace period everything closes.
    public func shutdownGracefully() {
        let grace = configuration.shutdownGracePeriod
        let draining: (listener: any Channel, connections: [any Channel])? = state.withLock { state in
            state.beginShutdown {
                Task {
                    guard (try? await Task.sleep(for: grace)) != nil else { return }
                    await self.forceClose()
                }
            }
        }
        guard let draining else { return }
        draining.listener.close(promise: nil)
        for connection in draining.connections {
            connection.close(mode: .input, promise: nil)
        }
    }

    /// Returns once the socket is listening; throws what `run()` threw if binding failed.
    public func waitUntilListening() async throws {
        try await withCheckedThrowingContinuation { continuation in
            switch state.withLock({ $0.addListeningWaiter(continuation) }) {
            case nil: break
            case .success?: continuation.resume()
            case .failure(let error)?: continuation.resume(throwing: error)
            }
        }
    }

    var isShuttingDown: Bool { state.withLock { $0.isShuttingDown } }

    private func forceClose() async {
        let (connections, work, finished) = state.withLock { ($0.openConnections, $0.work, $0.finished) }
        logger.warning("gateway grace period over: closing connections", metadata: ["connections": "\(connections.count)"])
        for connection in connections { connection.close(promise: nil) }
        work?.cancel()
        guard (try? await Task.sleep(for: .seconds(1))) != nil else { return }
        finished?.complete(nil)
    }
}
