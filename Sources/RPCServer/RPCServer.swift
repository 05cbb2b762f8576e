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
    let handler: any RPCMethodHandler
    let logger: Logger
    let state = LockedState(ServerState())
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
        self.handler = handler
        self.logger = logger
        requestBytes = RequestByteBudget(capacity: configuration.effectiveMaxBufferedRequestBytes)
    }

    /// Listens and serves until cancelled or shut down.
    ///
    /// For a socket path: creates the parent directory (0700) when missing and refuses one that
    /// others could write; throws `RPCServerError.alreadyInUse` when a live server answers at the
    /// path, replaces a stale socket file, and leaves the new socket 0600.
    /// - Throws: `RPCServerError` (or a NIO error) when it cannot listen; call it once.
    public func run() async throws {
        let listening: NIOAsyncChannel<AcceptedConnection, Never>
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
        logger.info("listening", metadata: ["rpc.listener": "\(listener)"])
        if shutdownRequested { shutdownGracefully() }

        // Not `work.value`: after the grace period a handler that ignores cancellation must
        // not keep the daemon from stopping.
        let acceptFailure = await withTaskCancellationHandler {
            await finished.completion()
        } onCancel: {
            shutdownGracefully()
        }
        state.withLock { $0.stopped() }
        logger.info("stopped listening", metadata: ["rpc.listener": "\(listener)"])
        if let acceptFailure { throw acceptFailure }
    }

    /// Begins a graceful shutdown (what cancelling `run()` does): stops accepting and reading,
    /// lets requests in flight finish within the grace period, then closes everything.
    /// Safe to call at any time and more than once; before `run()` binds, it makes `run()`
    /// return as soon as it has.
    public func shutdownGracefully() {
        let grace = configuration.shutdownGracePeriod
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
        logger.debug("shutting down", metadata: ["connections": "\(draining.connections.count)"])
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

    /// After the grace period: closes whatever is still open and cancels its handlers.
    private func forceClose() async {
        let (connections, work, finished) = state.withLock { ($0.openConnections, $0.work, $0.finished) }
        logger.warning("grace period over: closing connections", metadata: ["connections": "\(connections.count)"])
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
