import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

/// The HTTPS listener: TLS, HTTP/1.1 with keep-alive and pipelining, one handler per connection
/// that aggregates each request and answers it from the (in-memory, non-blocking) router.
enum HTTPServer {
    static func bind(
        host: String,
        port: Int,
        tls: NIOSSLContext,
        maxBodyBytes: Int,
        router: Router,
        connections: ConnectionRegistry
    ) async throws -> any Channel {
        try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelOption(.maxMessagesPerRead, value: 16)
            .childChannelInitializer { channel in
                connections.track(channel)
                return channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.addHandler(NIOSSLServerHandler(context: tls))
                    try pipeline.configureHTTPServerPipeline(withPipeliningAssistance: true, withErrorHandling: true)
                    try pipeline.addHandler(HTTPConnectionHandler(router: router, maxBodyBytes: maxBodyBytes))
                }
            }
            .bind(host: host, port: port)
            .get()
    }
}

/// The open client connections, so shutting down can drop them too (a stopped testbed must
/// look unreachable, also to clients holding keep-alive connections).
final class ConnectionRegistry: Sendable {
    private let open = Mutex<[ObjectIdentifier: any Channel]>([:])

    func track(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        open.withLock { $0[id] = channel }
        channel.closeFuture.whenComplete { [weak self] _ in
            self?.open.withLock { _ = $0.removeValue(forKey: id) }
        }
    }

    func closeAll() async {
        let channels = open.withLock { Array($0.values) }
        for channel in channels { try? await channel.close() }
    }
}

/// Aggregates one request at a time (the pipelining handler holds back the next one until this
/// response ends) and writes the router's answer.
final class HTTPConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let router: Router
    private let maxBodyBytes: Int
    private var head: HTTPRequestHead?
    private var body: ByteBuffer?
    private var bodyTooLarge = false

    init(router: Router, maxBodyBytes: Int) {
        self.router = router
        self.maxBodyBytes = maxBodyBytes
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let requestHead):
            head = requestHead
            body = nil
            bodyTooLarge = false
            if let length = requestHead.headers.first(name: "content-length").flatMap(Int.init), length > maxBodyBytes {
                bodyTooLarge = true
            }
        case .body(var chunk):
            guard !bodyTooLarge else { return }
            if (body?.readableBytes ?? 0) + chunk.readableBytes > maxBodyBytes {
                bodyTooLarge = true
                body = nil
            } else if body == nil {
                body = chunk
            } else {
                body!.writeBuffer(&chunk)
            }
        case .end:
            guard let requestHead = head else { return }
            head = nil
            let response: TestbedResponse
            var keepAlive = requestHead.isKeepAlive
            if bodyTooLarge {
                response = .xrpcError(.payloadTooLarge, "PayloadTooLarge", "request entity too large")
                keepAlive = false  // the rest of the body may still be arriving
            } else {
                let request = TestbedRequest(head: requestHead, body: body ?? ByteBuffer())
                response = router.handle(request)
            }
            body = nil
            if response.dropsConnection {
                context.close(promise: nil)
                return
            }
            if let delay = response.delay {
                let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
                let (version, omitBody) = (requestHead.version, requestHead.method == .HEAD)
                context.eventLoop.scheduleTask(in: .nanoseconds(Int64(delay.components.seconds) * 1_000_000_000
                                                                + delay.components.attoseconds / 1_000_000_000)) { [keepAlive] in
                    let (handler, context) = bound.value
                    guard context.channel.isActive else { return }
                    handler.write(response, version: version, keepAlive: keepAlive, omitBody: omitBody, context: context)
                }
                return
            }
            write(
                response, version: requestHead.version, keepAlive: keepAlive,
                omitBody: requestHead.method == .HEAD, context: context)
        }
    }

    private func write(
        _ response: TestbedResponse, version: HTTPVersion, keepAlive: Bool, omitBody: Bool,
        context: ChannelHandlerContext
    ) {
        var headers = response.headers
        headers.replaceOrAdd(name: "Content-Length", value: String(response.body.count))
        if !keepAlive {
            headers.replaceOrAdd(name: "Connection", value: "close")
        } else if version.minor == 0 {
            headers.replaceOrAdd(name: "Connection", value: "keep-alive")
        }
        let responseHead = HTTPResponseHead(version: version, status: response.status, headers: headers)
        context.write(wrapOutboundOut(.head(responseHead)), promise: nil)
        if let stall = response.stall {
            let half = context.channel.allocator.buffer(bytes: response.body.prefix(response.body.count / 2))
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(half))), promise: nil)
            let channel = context.channel
            channel.eventLoop.scheduleTask(in: .nanoseconds(Int64(stall.components.seconds) * 1_000_000_000
                                                              + stall.components.attoseconds / 1_000_000_000)) {
                channel.close(promise: nil)
            }
            return
        }
        if !response.body.isEmpty, !omitBody {
            let buffer = context.channel.allocator.buffer(bytes: response.body)
            context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // TLS failures and resets: nothing useful to answer, just drop the connection.
        context.close(promise: nil)
    }
}
