import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import RPCServer
#if canImport(Glibc)
import Glibc
#endif

/// An accepted gateway connection, HTTP/1.1 framed, with who is on the other end.
struct AcceptedGatewayConnection: Sendable {
    /// Answers are written on the channel itself, from its event loop, as the JSON-RPC server
    /// writes its replies: the async writer's hand-off cost 20 to 40 µs per answer.
    var channel: NIOAsyncChannel<HTTPServerRequestPart, Never>
    var peer: PeerCredentials?
}

extension GatewayServer {
    func bind() async throws -> NIOAsyncChannel<AcceptedGatewayConnection, Never> {
        let bootstrap = ServerBootstrap(group: configuration.eventLoopGroup)
            .serverChannelOption(.backlog, value: 256)
            // A drain closes the input; the answer to the request in flight must still go out.
            .childChannelOption(.allowRemoteHalfClosure, value: true)
        let initializer: @Sendable (any Channel) -> EventLoopFuture<AcceptedGatewayConnection> = { [listener] channel in
            let peer: EventLoopFuture<PeerCredentials?>
            if case .loopback = listener { peer = Self.loopbackPeer(of: channel) } else { peer = PeerCredentials.read(from: channel) }
            return peer.flatMapThrowing { peer in
                // No pipelining assistance: each connection's requests are read and answered one
                // after another by its task already.
                try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                    withPipeliningAssistance: false, withErrorHandling: true)
                return AcceptedGatewayConnection(
                    channel: try NIOAsyncChannel(wrappingChannelSynchronously: channel), peer: peer)
            }
        }
        let unix: RPCServer.Listener
        switch listener {
        case .loopback(let host, let port):
            let listening = try await bootstrap.bind(host: host, port: port, childChannelInitializer: initializer)
            boundPort.withLock { $0 = listening.channel.localAddress?.port }
            return listening
        case .unix(let listener):
            unix = listener
        }
        switch unix {
        case .inheritedDescriptor(let descriptor):
            return try await bootstrap.bind(NIOBSDSocket.Handle(descriptor), childChannelInitializer: initializer)
        case .path(let path):
            try SocketFile.checkLength(path)
            try SocketFile.prepareDirectory(for: path)
            try SocketFile.removeStaleSocket(at: path)
            let listening: NIOAsyncChannel<AcceptedGatewayConnection, Never>
            do {
                listening = try await bootstrap.bind(
                    unixDomainSocketPath: path, cleanupExistingSocketFile: false, childChannelInitializer: initializer)
            } catch let error as IOError where error.errnoCode == EADDRINUSE {
                throw RPCServerError.alreadyInUse(path)
            }
            let identity = SocketFile.identity(of: path)
            do {
                try SocketFile.restrictToOwner(path)
            } catch {
                try? await listening.channel.close()
                if let identity { SocketFile.remove(path, ifStill: identity) }
                throw error
            }
            state.withLock { $0.socketIdentity = identity }
            return listening
        }
    }

    /// Accepts until the listener closes, serving each connection in a child task on its own
    /// event loop; returns once every connection is done.
    func serveConnections(_ listening: NIOAsyncChannel<AcceptedGatewayConnection, Never>) async -> (any Error)? {
        await withDiscardingTaskGroup(returning: (any Error)?.self) { group in
            var failure: (any Error)?
            do {
                try await listening.executeThenClose { inbound in
                    for try await accepted in inbound {
                        let (id, draining) = state.withLock { $0.register(accepted.channel.channel) }
                        if draining { accepted.channel.channel.close(mode: .input, promise: nil) }
                        let connection = GatewayConnection(
                            channel: accepted.channel, peer: accepted.peer, handler: handler, admission: admission,
                            maxRequestBodyBytes: configuration.maxRequestBodyBytes,
                            isShuttingDown: { [self] in self.isShuttingDown }, logger: logger)
                        let executor = EventLoopTaskExecutor(accepted.channel.channel.eventLoop)
                        group.addTask(executorPreference: executor) {
                            await connection.serve()
                            self.state.withLock { $0.unregister(id) }
                        }
                    }
                }
            } catch {
                if !isShuttingDown {
                    logger.error("gateway: accepting connections failed", metadata: ["error": "\(error)"])
                    failure = error
                }
            }
            if case .unix(.path(let path)) = listener, let identity = state.withLock({ $0.socketIdentity }) {
                SocketFile.remove(path, ifStill: identity)
            }
            if failure != nil { shutdownGracefully() }
            return failure
        }
    }

    /// The loopback client's uid, from the kernel's socket table (read on NIO's blocking pool);
    /// no pid (TCP does not carry one), and nil when the table does not show the client.
    static func loopbackPeer(of channel: any Channel) -> EventLoopFuture<PeerCredentials?> {
        guard let client = channel.remoteAddress, let server = channel.localAddress else {
            return channel.eventLoop.makeSucceededFuture(nil)
        }
        return NIOThreadPool.singleton.runIfActive(eventLoop: channel.eventLoop) {
            LoopbackPeerOwner.uid(client: client, server: server).map { PeerCredentials(pid: 0, uid: $0, gid: 0) }
        }.recover { _ in nil }
    }
}
