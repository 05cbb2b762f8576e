import Logging
import NIOCore
import NIOPosix
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension SocketServer {
    func bind() async throws -> NIOAsyncChannel<Connection, Never> {
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            // A client's half-close (or a drain closing the input) must still let the answers
            // in flight go out.
            .childChannelOption(.allowRemoteHalfClosure, value: true)
        let unix: RPCServer.Listener
        switch address {
        case .loopback(let host, let port):
            let listening = try await bootstrap.bind(host: host, port: port, childChannelInitializer: accept)
            self.port.withLock { $0 = listening.channel.localAddress?.port }
            return listening
        case .unix(let listener):
            unix = listener
        }
        switch unix {
        case .inheritedDescriptor(let descriptor):
            return try await bootstrap.bind(NIOBSDSocket.Handle(descriptor), childChannelInitializer: accept)
        case .path(let path):
            try SocketFile.checkLength(path)
            try SocketFile.prepareDirectory(for: path)
            try SocketFile.removeStaleSocket(at: path)
            let listening: NIOAsyncChannel<Connection, Never>
            do {
                listening = try await bootstrap.bind(
                    unixDomainSocketPath: path, cleanupExistingSocketFile: false, childChannelInitializer: accept)
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

    /// Accepts until the listener closes, serving each connection in a child task on its own
    /// event loop; returns once every connection is done. Returns the accept loop's error
    /// unless shutting down.
    func serveConnections(_ listening: NIOAsyncChannel<Connection, Never>) async -> (any Error)? {
        await withDiscardingTaskGroup(returning: (any Error)?.self) { group in
            var failure: (any Error)?
            do {
                try await listening.executeThenClose { inbound in
                    for try await accepted in inbound {
                        let channel = channelOf(accepted)
                        let (id, draining) = state.withLock { $0.register(channel) }
                        if draining { channel.close(mode: .input, promise: nil) }
                        // Each connection's tasks run on its socket's event loop: a request is
                        // read, handled and answered on one thread, with no hop to the
                        // concurrency pool and back (most of the added latency on 2 cores).
                        group.addTask(executorPreference: EventLoopTaskExecutor(channel.eventLoop)) {
                            let context = ConnectionContext(id: id, boundPort: self.boundPort,
                                                            isShuttingDown: { [self] in self.isShuttingDown })
                            await self.serve(accepted, context)
                            self.state.withLock { $0.unregister(id) }
                        }
                    }
                }
            } catch {
                if !isShuttingDown {
                    logger.error("accepting connections failed", metadata: ["\(label).error": "\(error)"])
                    failure = error
                }
            }
            if case .unix(.path(let path)) = address, let identity = state.withLock({ $0.socketIdentity }) {
                SocketFile.remove(path, ifStill: identity)
            }
            if failure != nil { shutdownGracefully() }
            return failure
        }
    }
}
