import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import RPCServer

/// Plain XRPC over HTTP/1.1 (keep-alive) for programs that speak XRPC, not blueskyd's
/// JSON-RPC: every request is admitted (`GatewayAdmission`) and answered by the handler.
///
/// Binding, draining and the grace period are `SocketServer`'s, as for the JSON-RPC server.
public final class GatewayServer: Sendable {
    public struct Configuration: Sendable {
        /// Request bodies up to this many bytes are held whole, so that a call can be sent again
        /// after a refresh; larger ones (a blob upload), or of unknown length, are passed on as
        /// they arrive, never held whole.
        public var wholeBodyLimit: Int = 1 << 20
        /// Only this uid's requests are served.
        public var allowedUID: UInt32 = UInt32(getuid())
        /// How long requests in flight may take to finish after a shutdown begins.
        public var shutdownGracePeriod: Duration = .seconds(5)
        public var eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
        /// Serve every local user, not only `allowedUID` (what only public facts may do).
        public var anyUser = false
        /// Told of each request refused at the door (for metrics).
        public var refused: (@Sendable (GatewayRefusal) -> Void)?
        /// Whether a request from a loopback client whose uid cannot be read carries a local
        /// token (from a file only the daemon's user can read).
        public var vouchedFor: (@Sendable (HTTPRequestHead) -> Bool)?

        public init(wholeBodyLimit: Int = 1 << 20, allowedUID: UInt32 = UInt32(getuid()),
                    shutdownGracePeriod: Duration = .seconds(5)) {
            self.wholeBodyLimit = wholeBodyLimit
            self.allowedUID = allowedUID
            self.shutdownGracePeriod = shutdownGracePeriod
        }
    }

    /// Where the gateway listens: a Unix socket (a path it creates, or one systemd passed), or
    /// a loopback TCP address (port 0: any free port) for programs that cannot use a Unix
    /// socket, whose client's uid is read from the kernel's socket table.
    public enum Listener: Sendable, Hashable, CustomStringConvertible {
        case unix(RPCServer.Listener)
        case loopback(host: String, port: Int)

        var address: SocketServer<AcceptedGatewayConnection>.Address {
            switch self {
            case .unix(let listener): .unix(listener)
            case .loopback(let host, let port): .loopback(host: host, port: port)
            }
        }

        public var description: String { address.description }
    }

    public let listener: Listener
    public let configuration: Configuration
    /// Binding, accepting and draining (shared with the JSON-RPC server).
    let core: SocketServer<AcceptedGatewayConnection>

    public init(listener: Listener, configuration: Configuration, handler: some GatewayHandler, logger: Logger) {
        self.listener = listener
        self.configuration = configuration
        core = SocketServer<AcceptedGatewayConnection>(
            address: listener.address, group: configuration.eventLoopGroup, gracePeriod: configuration.shutdownGracePeriod,
            logger: logger, label: "gateway",
            accept: { channel in
                let peer: EventLoopFuture<(PeerCredentials?, LoopbackClientSocket?)>
                if case .loopback = listener {
                    peer = Self.loopbackSocket(of: channel).map { socket in
                        (socket.map { PeerCredentials(pid: 0, uid: $0.uid, gid: 0) }, socket)
                    }
                } else {
                    peer = PeerCredentials.read(from: channel).map { ($0, nil) }
                }
                return peer.flatMapThrowing { peer, socket in
                    // No pipelining assistance: each connection's requests are read and
                    // answered one after another by its task already.
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                        withPipeliningAssistance: false, withErrorHandling: true)
                    return AcceptedGatewayConnection(
                        channel: try NIOAsyncChannel(wrappingChannelSynchronously: channel), peer: peer, loopbackSocket: socket)
                }
            },
            channelOf: { $0.channel.channel },
            serve: { accepted, context in
                // On TCP, `Host` must name the port listened on.
                var admission = GatewayAdmission(allowedUID: configuration.allowedUID, port: context.boundPort,
                                                 vouchedFor: configuration.vouchedFor)
                admission.anyUser = configuration.anyUser
                await GatewayConnection(channel: accepted.channel, peer: accepted.peer, loopbackSocket: accepted.loopbackSocket,
                                        handler: handler, admission: admission,
                                        wholeBodyLimit: configuration.wholeBodyLimit, refused: configuration.refused,
                                        isShuttingDown: context.isShuttingDown, logger: logger).serve()
            })
    }

    /// The listener, with the port actually bound.
    public var boundDescription: String { core.boundDescription }

    /// The loopback port listened on, once listening (nil for a Unix socket).
    public var port: Int? { core.boundPort }

    /// Listens and serves until cancelled or shut down (the socket file as `RPCServer.run()`
    /// makes it: a 0700 directory, a stale socket replaced, the socket 0600).
    public func run() async throws {
        try await core.run()
    }

    /// Stops accepting; each connection ends after the request it is answering (keep-alive
    /// connections idle between requests end at once); after the grace period everything closes.
    public func shutdownGracefully() {
        core.shutdownGracefully()
    }

    /// Returns once the socket is listening; throws what `run()` threw if binding failed.
    public func waitUntilListening() async throws {
        try await core.waitUntilListening()
    }
}
