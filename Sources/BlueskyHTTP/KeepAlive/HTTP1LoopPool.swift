import NIOCore
import NIOHTTP1
import NIOSSL

/// The keep-alive connections of one event loop. Everything here runs on that loop, so a
/// request started by a task on the loop is written, answered and handed back on one thread.
///
/// At most `maxConnectionsPerOrigin` connections to one server are open at a time; further
/// requests wait for one to come free (or for their deadline), so a burst of local calls never
/// turns into a flood of connections to the PDS.
final class HTTP1LoopPool: @unchecked Sendable {
    struct Limits {
        var connectTimeout: TimeAmount
        var idleTimeout: TimeAmount
        var maxIdlePerOrigin: Int
        var maxConnectionsPerOrigin: Int
    }

    /// One open connection and the handler that runs its exchanges (used on the loop only).
    final class Connection: @unchecked Sendable {
        let channel: any Channel
        let handler: HTTP1ExchangeHandler
        var idleTimer: Scheduled<Void>?
        init(channel: any Channel, handler: HTTP1ExchangeHandler) {
            self.channel = channel
            self.handler = handler
        }
    }

    /// A request waiting for a connection: a new one, or one an earlier request is done with.
    final class Waiter: @unchecked Sendable {
        let promise: EventLoopPromise<(Connection, reused: Bool)>
        var deadline: Scheduled<Void>?
        init(promise: EventLoopPromise<(Connection, reused: Bool)>) { self.promise = promise }
    }

    let loop: any EventLoop
    let tls: NIOSSLContext
    let limits: Limits
    private var idle: [HTTP1Origin: [Connection]] = [:]
    private var open: [HTTP1Origin: Int] = [:]
    private var waiting: [HTTP1Origin: [Waiter]] = [:]
    private(set) var isShutDown = false

    init(loop: any EventLoop, tls: NIOSSLContext, limits: Limits) {
        self.loop = loop
        self.tls = tls
        self.limits = limits
    }

    /// Sends one request and collects its answer. When a reused connection fails before any
    /// answer (the server's idle close racing the request), the request goes once more to
    /// another connection if it provably never left, or if it is idempotent; a procedure that
    /// may have reached the server fails instead (``HTTP1ExchangeFailure/allowsRetry(of:)``).
    func execute(origin: HTTP1Origin, head: HTTPRequestHead, body: ByteBuffer?, maxBodyBytes: Int,
                 timeout: TimeAmount) -> EventLoopFuture<InboundResponse> {
        loop.preconditionInEventLoop()
        // One deadline for the whole request: waiting for a connection counts against it.
        return attempt(origin: origin, head: head, body: body, maxBodyBytes: maxBodyBytes,
                       deadline: .now() + timeout, mayRetry: true)
    }

    private func attempt(origin: HTTP1Origin, head: HTTPRequestHead, body: ByteBuffer?, maxBodyBytes: Int,
                         deadline: NIODeadline, mayRetry: Bool) -> EventLoopFuture<InboundResponse> {
        acquire(origin, deadline: deadline).flatMap { connection, reused in
            let promise = self.loop.makePromise(of: InboundResponse.self)
            connection.handler.start(head: head, body: body, maxBodyBytes: maxBodyBytes,
                                     timeout: max(deadline - .now(), .zero), promise: promise)
            return promise.futureResult.flatMapError { error in
                guard reused, mayRetry, let failure = error as? HTTP1ExchangeFailure,
                      failure.allowsRetry(of: head.method) else {
                    return self.loop.makeFailedFuture(error)
                }
                return self.attempt(origin: origin, head: head, body: body, maxBodyBytes: maxBodyBytes,
                                    deadline: deadline, mayRetry: false)
            }
        }
    }

    /// Closes every idle connection, fails every waiting request, and refuses new ones.
    func shutdown() {
        loop.preconditionInEventLoop()
        isShutDown = true
        let all = idle.values.flatMap { $0 }
        idle.removeAll()
        for connection in all { connection.channel.close(promise: nil) }
        let waiters = waiting.values.flatMap { $0 }
        waiting.removeAll()
        for waiter in waiters {
            waiter.deadline?.cancel()
            waiter.promise.fail(HTTP1ExchangeFailure.transport(ChannelError.ioOnClosedChannel))
        }
    }

    /// An idle connection, a new one while under the limit, or a place in the queue.
    private func acquire(_ origin: HTTP1Origin, deadline: NIODeadline) -> EventLoopFuture<(Connection, reused: Bool)> {
        if let connection = takeIdle(origin) { return loop.makeSucceededFuture((connection, reused: true)) }
        if open[origin, default: 0] < limits.maxConnectionsPerOrigin {
            return openConnection(to: origin).map { ($0, reused: false) }
        }
        let waiter = Waiter(promise: loop.makePromise())
        waiter.deadline = loop.scheduleTask(deadline: deadline) { [weak self, weak waiter] () -> Void in
            guard let self, let waiter else { return }
            self.waiting[origin]?.removeAll { $0 === waiter }
            waiter.promise.fail(HTTP1ExchangeFailure.timedOut)
        }
        waiting[origin, default: []].append(waiter)
        return waiter.promise.futureResult
    }

    /// Opens a connection and counts it until it closes.
    private func openConnection(to origin: HTTP1Origin) -> EventLoopFuture<Connection> {
        guard !isShutDown else {
            return loop.makeFailedFuture(HTTP1ExchangeFailure.transport(ChannelError.ioOnClosedChannel))
        }
        open[origin, default: 0] += 1
        return connect(origin,
                       onReusable: { [weak self] connection in self?.release(connection, origin: origin) },
                       onClosed: { [weak self] connection in self?.closed(connection, origin: origin) })
            .flatMapErrorThrowing { error in
                self.open[origin, default: 1] -= 1
                self.serveNextWaiter(origin)
                throw error
            }
    }

    private func takeIdle(_ origin: HTTP1Origin) -> Connection? {
        while let connection = idle[origin]?.popLast() {
            connection.idleTimer?.cancel()
            connection.idleTimer = nil
            // A server closes idle connections together (its idle timeout): ask the kernel
            // about each one here, so that every dead one is passed over before a request is
            // written, not only the first.
            if connection.channel.isActive, !connection.handler.isBusy,
               !HTTP1ExchangeHandler.peerHasClosed(connection.channel) { return connection }
            connection.channel.close(promise: nil)
        }
        return nil
    }

    /// A connection finished an exchange and may take another: the next waiter's, or idle.
    private func release(_ connection: Connection, origin: HTTP1Origin) {
        guard !isShutDown, connection.channel.isActive else {
            connection.channel.close(promise: nil)
            return
        }
        if let waiter = nextWaiter(origin) {
            waiter.promise.succeed((connection, reused: true))
            return
        }
        guard idle[origin, default: []].count < limits.maxIdlePerOrigin else {
            connection.channel.close(promise: nil)
            return
        }
        idle[origin, default: []].append(connection)
        connection.idleTimer = loop.scheduleTask(in: limits.idleTimeout) { [weak connection] in
            connection?.channel.close(promise: nil)
        }
    }

    /// A connection went away: it no longer counts, and a waiter may open a new one.
    private func closed(_ connection: Connection, origin: HTTP1Origin) {
        connection.idleTimer?.cancel()
        connection.idleTimer = nil
        idle[origin]?.removeAll { $0 === connection }
        open[origin, default: 1] -= 1
        serveNextWaiter(origin)
    }

    private func serveNextWaiter(_ origin: HTTP1Origin) {
        guard open[origin, default: 0] < limits.maxConnectionsPerOrigin, let waiter = nextWaiter(origin) else { return }
        openConnection(to: origin).whenComplete { result in
            switch result {
            case .success(let connection): waiter.promise.succeed((connection, reused: false))
            case .failure(let error): waiter.promise.fail(error)
            }
        }
    }

    private func nextWaiter(_ origin: HTTP1Origin) -> Waiter? {
        guard var queue = waiting[origin], !queue.isEmpty else { return nil }
        let waiter = queue.removeFirst()
        waiting[origin] = queue.isEmpty ? nil : queue
        waiter.deadline?.cancel()
        return waiter
    }
}
