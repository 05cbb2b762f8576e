import JSONRPC
import Logging
import NIOCore
import NIOPosix

/// blueskyd's JSON-RPC server on a Unix stream socket.
///
/// `run()` serves until its task is cancelled or `shutdownGracefully()` is called; it then stops
/// accepting and reading, lets the requests in flight finish and send their replies (up to
/// `Configuration.shutdownGracePeriod`), closes every connection, removes the socket file it
/// created, and returns. Failures of single connections are logged and never stop the server.
public final class RPCServer: Sendable {
    public let listener: Listener
    public let configuration: Configuration
    /// Binding, accepting and draining (shared with the XRPC gateway).
    let core: SocketServer<AcceptedConnection>
    /// Request lines held across all connections (`Configuration.maxBufferedRequestBytes`).
    let requestBytes: RequestByteBudget

    /// Bytes of request lines held now, and how many connections wait for room to read more.
    public var bufferedRequests: (bytes: Int, waitingConnections: Int) {
        let usage = requestBytes.usage
        return (usage.inUse, usage.waiting)
    }

    /// A server that creates its socket at `socketPath` (see `run()` for the checks).
    public convenience init(
        socketPath: String, configuration: Configuration = .init(),
        handler: some RPCMethodHandler, logger: Logger
    ) {
        self.init(listener: .path(socketPath), configuration: configuration, handler: handler, logger: logger)
    }

    /// A server on an already bound, listening socket (systemd socket activation).
    public convenience init(
        inheritedListeningFD descriptor: Int32, configuration: Configuration = .init(),
        handler: some RPCMethodHandler, logger: Logger
    ) {
        self.init(
            listener: .inheritedDescriptor(descriptor), configuration: configuration, handler: handler,
            logger: logger)
    }

    public init(listener: Listener, configuration: Configuration, handler: some RPCMethodHandler, logger: Logger) {
        self.listener = listener
        self.configuration = configuration
        let requestBytes = RequestByteBudget(capacity: configuration.effectiveMaxBufferedRequestBytes)
        self.requestBytes = requestBytes
        core = SocketServer(
            address: .unix(listener), group: configuration.eventLoopGroup, gracePeriod: configuration.shutdownGracePeriod,
            logger: logger, label: "rpc",
            accept: { channel in
                // Completes at once on the channel's loop, before any read can be dropped.
                PeerCredentials.read(from: channel).flatMapThrowing { peer in
                    AcceptedConnection(channel: try NIOAsyncChannel(wrappingChannelSynchronously: channel), peer: peer)
                }
            },
            channelOf: { $0.channel.channel },
            serve: { accepted, context in
                await RPCConnection(channel: accepted.channel, id: context.id, peer: accepted.peer, handler: handler,
                                    configuration: configuration, requestBytes: requestBytes, logger: logger).serve()
            })
    }

    /// Listens and serves until cancelled or shut down.
    ///
    /// For a socket path: creates the parent directory (0700) when missing and refuses one that
    /// others could write; throws `RPCServerError.alreadyInUse` when a live server answers at the
    /// path, replaces a stale socket file, and leaves the new socket 0600.
    /// - Throws: `RPCServerError` (or a NIO error) when it cannot listen; call it once.
    public func run() async throws {
        try await core.run()
    }

    /// Begins a graceful shutdown (what cancelling `run()` does): stops accepting and reading,
    /// lets requests in flight finish within the grace period, then closes everything.
    /// Safe to call at any time and more than once; before `run()` binds, it makes `run()`
    /// return as soon as it has.
    public func shutdownGracefully() {
        core.shutdownGracefully()
    }

    /// Returns once the socket is listening; throws what `run()` threw if binding failed.
    public func waitUntilListening() async throws {
        try await core.waitUntilListening()
    }
}
