import NIOCore

/// The server's mutable state, always accessed under `RPCServer.state`'s lock.
package struct ServerState {
    package init() {}

    private enum Phase {
        case idle
        case binding
        case listening(listener: any Channel)
        case draining
        case stopped
    }

    private var phase = Phase.idle
    private var shutdownRequested = false
    private var connections: [UInt64: any Channel] = [:]
    private var nextConnectionID: UInt64 = 1
    private var listeningResult: Result<Void, any Error>?
    private var listeningWaiters: [CheckedContinuation<Void, any Error>] = []
    private var graceTimer: Task<Void, Never>?
    /// The task serving connections, cancelled when the grace period runs out.
    package private(set) var work: Task<Void, Never>?
    /// Completed when serving is over (or abandoned after the grace period).
    package private(set) var finished: CompletionSignal<(any Error)?>?
    /// The socket file this server created, removed on shutdown.
    package var socketIdentity: SocketFile.Identity?

    package var isShuttingDown: Bool {
        switch phase {
        case .draining, .stopped: true
        default: shutdownRequested
        }
    }

    package var openConnections: [any Channel] { Array(connections.values) }

    /// The listening channel while the server accepts connections.
    package var listeningChannel: (any Channel)? {
        if case .listening(let listener) = phase { return listener }
        return nil
    }

    package mutating func startBinding() throws {
        guard case .idle = phase else { throw RPCServerStateError.alreadyStarted }
        phase = .binding
    }

    /// Returns the waiters to fail.
    package mutating func bindingFailed(_ error: any Error) -> [CheckedContinuation<Void, any Error>] {
        if case .binding = phase { phase = .stopped }
        if listeningResult == nil { listeningResult = .failure(error) }
        defer { listeningWaiters = [] }
        return listeningWaiters
    }

    /// Returns the waiters to wake and whether a shutdown was requested while binding.
    package mutating func listening(
        on listener: any Channel, work: Task<Void, Never>, finished: CompletionSignal<(any Error)?>
    ) -> ([CheckedContinuation<Void, any Error>], Bool) {
        phase = .listening(listener: listener)
        self.work = work
        self.finished = finished
        listeningResult = .success(())
        defer { listeningWaiters = [] }
        return (listeningWaiters, shutdownRequested)
    }

    /// Nil when the waiter was queued, else the outcome to give it now.
    package mutating func addListeningWaiter(_ waiter: CheckedContinuation<Void, any Error>) -> Result<Void, any Error>? {
        if let listeningResult { return listeningResult }
        listeningWaiters.append(waiter)
        return nil
    }

    /// Moves to draining; returns what to close, or nil when there is nothing to do yet.
    package mutating func beginShutdown(
        startingGraceTimer: () -> Task<Void, Never>
    ) -> (listener: any Channel, connections: [any Channel])? {
        shutdownRequested = true
        guard case .listening(let listener) = phase else { return nil }
        phase = .draining
        graceTimer = startingGraceTimer()
        return (listener, Array(connections.values))
    }

    package mutating func stopped() {
        phase = .stopped
        graceTimer?.cancel()
        graceTimer = nil
        work = nil
        finished = nil
    }

    /// Returns the new connection's id, and whether it must stop reading at once (draining).
    package mutating func register(_ channel: any Channel) -> (UInt64, Bool) {
        let id = nextConnectionID
        nextConnectionID += 1
        connections[id] = channel
        return (id, isShuttingDown)
    }

    package mutating func unregister(_ id: UInt64) {
        connections[id] = nil
    }
}

/// Misuse of the server object itself.
enum RPCServerStateError: Error, CustomStringConvertible {
    case alreadyStarted

    var description: String { "RPCServer.run() was called more than once" }
}
