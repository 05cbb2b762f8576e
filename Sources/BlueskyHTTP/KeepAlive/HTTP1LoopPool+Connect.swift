import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

extension HTTP1LoopPool {
    /// Opens a TCP (and TLS) connection on this loop with the HTTP/1.1 client pipeline.
    /// `onReusable` runs when an exchange ends with keep-alive, `onClosed` once when the
    /// channel goes away; until then the handler keeps its connection alive.
    func connect(_ origin: HTTP1Origin, onReusable: @escaping @Sendable (Connection) -> Void,
                 onClosed: @escaping @Sendable (Connection) -> Void) -> EventLoopFuture<Connection> {
        let handler = HTTP1ExchangeHandler()
        let tls = self.tls
        return ClientBootstrap(group: loop)
            .connectTimeout(limits.connectTimeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
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
                handler.onReusable = { onReusable(connection) }
                handler.onClosed = { onClosed(connection) }
                return connection
            }
            .flatMapErrorThrowing { error in throw HTTP1ExchangeFailure.transport(error) }
    }
}
