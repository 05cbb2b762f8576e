import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// The keep-alive connections of one event loop. Everything here runs on that loop, so a
/// request started by a task on the loop is written, answered and handed back on one thread.
final class HTTP1LoopPool: @unchecked Sendable {
    struct Limits {
        var connectTimeout: TimeAmount
        var idleTimeout: TimeAmount
        var maxIdlePerOrigin: Int
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

    let loop: any EventLoop
    private let tls: NIOSSLContext
    private let limits: Limits
    private var idle: [HTTP1Origin: [Connection]] = [:]
    private var isShutDown = false

    init(loop: any EventLoop, tls: NIOSSLContext, limits: Limits) {
        self.loop = loop
        self.tls = tls
        self.limits = limits
    }

    /// Sends one request and collects its answer. A reused connection that the server closed
    /// before answering (its idle timeout racing the request) gets the request once more on a
    /// fresh connection: the server never saw it.
    func execute(origin: HTTP1Origin, head: HTTPRequestHead, body: ByteBuffer?, maxBodyBytes: Int,
                 timeout: TimeAmount) -> EventLoopFuture<InboundResponse> {
        loop.preconditionInEventLoop()
        if let reused = takeIdle(origin) {
            return exchange(on: reused, head: head, body: body, maxBodyBytes: maxBodyBytes, timeout: timeout)
                .flatMapError { error in
                    guard case HTTP1ExchangeFailure.closedBeforeResponse = error else {
                        return self.loop.makeFailedFuture(error)
                    }
                    return self.freshExchange(origin: origin, head: head, body: body,
                                              maxBodyBytes: maxBodyBytes, timeout: timeout)
                }
        }
        return freshExchange(origin: origin, head: head, body: body, maxBodyBytes: maxBodyBytes, timeout: timeout)
    }

    /// Closes every idle connection and refuses new ones.
    func shutdown() {
        loop.preconditionInEventLoop()
        isShutDown = true
        let all = idle.values.flatMap { $0 }
        idle.removeAll()
        for connection in all { connection.channel.close(promise: nil) }
    }

    private func freshExchange(origin: HTTP1Origin, head: HTTPRequestHead, body: ByteBuffer?, maxBodyBytes: Int,
                               timeout: TimeAmount) -> EventLoopFuture<InboundResponse> {
        connect(origin).flatMap { connection in
            self.exchange(on: connection, head: head, body: body, maxBodyBytes: maxBodyBytes, timeout: timeout)
        }
    }

    private func exchange(on connection: Connection, head: HTTPRequestHead, body: ByteBuffer?, maxBodyBytes: Int,
                          timeout: TimeAmount) -> EventLoopFuture<InboundResponse> {
        let promise = loop.makePromise(of: InboundResponse.self)
        connection.handler.start(head: head, body: body, maxBodyBytes: maxBodyBytes, timeout: timeout,
                                 promise: promise)
        return promise.futureResult
    }

    private func takeIdle(_ origin: HTTP1Origin) -> Connection? {
        while let connection = idle[origin]?.popLast() {
            connection.idleTimer?.cancel()
            connection.idleTimer = nil
            if connection.channel.isActive, !connection.handler.isBusy { return connection }
            connection.channel.close(promise: nil)
        }
        return nil
    }

    private func release(_ connection: Connection, origin: HTTP1Origin) {
        guard !isShutDown, connection.channel.isActive, idle[origin, default: []].count < limits.maxIdlePerOrigin else {
            connection.channel.close(promise: nil)
            return
        }
        idle[origin, default: []].append(connection)
        connection.idleTimer = loop.scheduleTask(in: limits.idleTimeout) { [weak self, weak connection] in
            guard let self, let connection else { return }
            self.forget(connection, origin: origin)
            connection.channel.close(promise: nil)
        }
    }

    private func forget(_ connection: Connection, origin: HTTP1Origin) {
        connection.idleTimer?.cancel()
        connection.idleTimer = nil
        idle[origin]?.removeAll { $0 === connection }
    }

    private func connect(_ origin: HTTP1Origin) -> EventLoopFuture<Connection> {
        guard !isShutDown else { return loop.makeFailedFuture(HTTP1ExchangeFailure.transport(ChannelError.ioOnClosedChannel)) }
        let handler = HTTP1ExchangeHandler()
        let tls = self.tls
        return ClientBootstrap(group: loop)
            .connectTimeout(limits.connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    if origin.isTLS {
                        // SNI carries names only; an IP literal is verified without it.
                        let name = origin.isIPAddress ? nil : origin.host
                        try pipeline.addHandler(NIOSSLClientHandler(context: tls, serverHostname: name))
                    }
                    try pipeline.addHTTPClientHandlers()
                    try pipeline.addHandler(handler)
                }
            }
            .connect(host: origin.host, port: origin.port)
            .map { channel in
                let connection = Connection(channel: channel, handler: handler)
                // The handler holds its connection until the channel closes, which clears both.
                handler.onReusable = { [weak self] in self?.release(connection, origin: origin) }
                handler.onClosed = { [weak self] in self?.forget(connection, origin: origin) }
                return connection
            }
            .flatMapErrorThrowing { error in throw HTTP1ExchangeFailure.transport(error) }
    }
}
