import Logging
import NIOCore
import NIOPosix
import Synchronization

/// What a server of stream-socket connections does around them: binding (a socket file made
/// safely, a descriptor systemd passed, or a loopback TCP address), accepting each connection
/// into a child task on its own event loop, and stopping: no more accepting, every
/// connection's input closed so that it ends after the request it is answering, then after the
/// grace period everything closed, and the socket file it made removed.
///
/// The JSON-RPC server and the XRPC gateway differ only in what they do with a connection
/// (`serve`) and what they learn of it when it is accepted (`accept`).
package final class SocketServer<Connection: Sendable>: Sendable {
    /// What a connection's server tells it.
    package struct ConnectionContext: Sendable {
        /// Numbers the server's connections, for the logs.
        package var id: UInt64
        /// The TCP port listened on (a loopback address), nil on a Unix socket.
        package var boundPort: Int?
        /// True once a stop began: a connection answers what it is answering, then ends.
        package var isShuttingDown: @Sendable () -> Bool
    }

    /// Where to listen.
    package enum Address: Sendable, Hashable, CustomStringConvertible {
        case unix(RPCServer.Listener)
        /// A loopback TCP address; port 0 lets the kernel choose (`boundPort` says which).
        case loopback(host: String, port: Int)

        package var description: String {
            switch self {
            case .unix(.path(let path)): path
            case .unix(.inheritedDescriptor(let descriptor)): "inherited descriptor \(descriptor)"
            case .loopback(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
            }
        }
    }

    package let address: Address
    let group: any EventLoopGroup
    let gracePeriod: Duration
    let logger: Logger
    /// Names the server in its log lines ("listening" with `<label>.listener`).
    let label: String
    /// Runs on the accepted channel's event loop before any read: what the connection needs to
    /// know of its peer, and its pipeline.
    let accept: @Sendable (any Channel) -> EventLoopFuture<Connection>
    let channelOf: @Sendable (Connection) -> any Channel
    /// Serves one connection until it ends; never throws.
    let serve: @Sendable (Connection, ConnectionContext) async -> Void
    package let state = Mutex(ServerState())
    let port = Mutex<Int?>(nil)

    package init(address: Address, group: any EventLoopGroup, gracePeriod: Duration, logger: Logger, label: String,
                 accept: @escaping @Sendable (any Channel) -> EventLoopFuture<Connection>,
                 channelOf: @escaping @Sendable (Connection) -> any Channel,
                 serve: @escaping @Sendable (Connection, ConnectionContext) async -> Void) {
        self.address = address
        self.group = group
        self.gracePeriod = gracePeriod
        self.logger = logger
        self.label = label
        self.accept = accept
        self.channelOf = channelOf
        self.serve = serve
    }

    /// The TCP port listened on, once listening (nil for a Unix socket).
    package var boundPort: Int? { port.withLock { $0 } }

    /// The address, with the port actually bound.
    package var boundDescription: String {
        guard case .loopback(let host, _) = address, let boundPort else { return address.description }
        return Address.loopback(host: host, port: boundPort).description
    }

    package var isShuttingDown: Bool { state.withLock { $0.isShuttingDown } }

    /// Listens and serves until cancelled or shut down; throws when it cannot listen.
    package func run() async throws {
        let listening: NIOAsyncChannel<Connection, Never>
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
        logger.info("\(label == "rpc" ? "" : label + " ")listening", metadata: ["\(label).listener": "\(boundDescription)"])
        if shutdownRequested { shutdownGracefully() }

        // Not `work.value`: after the grace period a handler that ignores cancellation must
        // not keep the daemon from stopping.
        let acceptFailure = await withTaskCancellationHandler {
            await finished.completion()
        } onCancel: {
            shutdownGracefully()
        }
        state.withLock { $0.stopped() }
        logger.info("\(label == "rpc" ? "" : label + " ")stopped listening", metadata: ["\(label).listener": "\(boundDescription)"])
        if let acceptFailure { throw acceptFailure }
    }

    /// Stops accepting and reading; safe at any time and more than once (before `run()`
    /// binds, it makes `run()` return as soon as it has).
    package func shutdownGracefully() {
        let grace = gracePeriod
        let draining: (listener: any Channel, connections: [any Channel])? = state.withLock { state in
            state.beginShutdown {
                Task {
                    // Cancelled when everything finished in time.
                    guard (try? await Task.sleep(for: grace)) != nil else { return }
                    await self.forceClose()
                }
            }
        }
        guard let draining else { return }
        logger.debug("shutting down", metadata: ["\(label).connections": "\(draining.connections.count)"])
        draining.listener.close(promise: nil)
        for connection in draining.connections {
            connection.close(mode: .input, promise: nil)
        }
    }

    /// Returns once listening; throws what `run()` threw if binding failed.
    package func waitUntilListening() async throws {
        try await withCheckedThrowingContinuation { continuation in
            switch state.withLock({ $0.addListeningWaiter(continuation) }) {
            case nil: break
            case .success?: continuation.resume()
            case .failure(let error)?: continuation.resume(throwing: error)
            }
        }
    }

    /// After the grace period: closes whatever is still open and cancels its handlers.
    private func forceClose() async {
        let (connections, work, finished) = state.withLock { ($0.openConnections, $0.work, $0.finished) }
        logger.warning("grace period over: closing connections", metadata: ["\(label).connections": "\(connections.count)"])
        for connection in connections { connection.close(promise: nil) }
        work?.cancel()
        // Cancelled handlers get a moment to return; one that ignores cancellation is abandoned.
        guard (try? await Task.sleep(for: .seconds(1))) != nil else { return }
        if !state.withLock({ $0.openConnections.isEmpty }) {
            logger.warning("abandoning request handlers that ignored cancellation")
        }
        finished?.complete(nil)
    }
}
