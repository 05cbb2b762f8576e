import JSONRPC
import Logging
import NIOCore
import NIOPosix
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An accepted connection, with who is on the other end.
struct AcceptedConnection: Sendable {
    var channel: NIOAsyncChannel<ByteBuffer, Never>
    var peer: PeerCredentials?
}

extension RPCServer {
    func bind() async throws -> NIOAsyncChannel<AcceptedConnection, Never> {
        let bootstrap = ServerBootstrap(group: configuration.eventLoopGroup)
            .serverChannelOption(.backlog, value: 256)
            // A client's half-close must still let us send its outstanding replies.
            .childChannelOption(.allowRemoteHalfClosure, value: true)
        let initializer: @Sendable (any Channel) -> EventLoopFuture<AcceptedConnection> = { channel in
            // Completes at once on the channel's loop, before any read can be dropped.
            PeerCredentials.read(from: channel).flatMapThrowing { peer in
                AcceptedConnection(channel: try NIOAsyncChannel(wrappingChannelSynchronously: channel), peer: peer)
            }
        }
        switch listener {
        case .inheritedDescriptor(let descriptor):
            return try await bootstrap.bind(NIOBSDSocket.Handle(descriptor), childChannelInitializer: initializer)
        case .path(let path):
            try SocketFile.checkLength(path)
            try SocketFile.prepareDirectory(for: path)
            try SocketFile.removeStaleSocket(at: path)
            let listening: NIOAsyncChannel<AcceptedConnection, Never>
            do {
                listening = try await bootstrap.bind(
                    unixDomainSocketPath: path, cleanupExistingSocketFile: false, childChannelInitializer: initializer)
            } catch let error as IOError where error.errnoCode == EADDRINUSE {
                // Another server bound the path between our check and our bind.
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

    /// Accepts until the listener closes, serving each connection in a child task; returns
    /// once every connection is done. Returns the accept loop's error unless shutting down.
    func serveConnections(_ listening: NIOAsyncChannel<AcceptedConnection, Never>) async -> (any Error)? {
        await withDiscardingTaskGroup(returning: (any Error)?.self) { group in
            var failure: (any Error)?
            do {
                try await listening.executeThenClose { inbound in
                    for try await accepted in inbound {
                        let (id, draining) = state.withLock { $0.register(accepted.channel.channel) }
                        if draining { accepted.channel.channel.close(mode: .input, promise: nil) }
                        let connection = RPCConnection(
                            channel: accepted.channel, id: id, peer: accepted.peer, handler: handler,
                            configuration: configuration, requestBytes: requestBytes, logger: logger)
                        let executor = EventLoopTaskExecutor(accepted.channel.channel.eventLoop)
                        group.addTask(executorPreference: executor) {
                            await connection.serve()
                            self.state.withLock { $0.unregister(id) }
                        }
                    }
                }
            } catch {
                if !state.withLock({ $0.isShuttingDown }) {
                    logger.error("accepting connections failed", metadata: ["error": "\(error)"])
                    failure = error
                }
            }
            removeSocketFile()
            if failure != nil { shutdownGracefully() }
            return failure
        }
    }

    private func removeSocketFile() {
        guard case .path(let path) = listener, let identity = state.withLock({ $0.socketIdentity }) else { return }
        SocketFile.remove(path, ifStill: identity)
    }
}
