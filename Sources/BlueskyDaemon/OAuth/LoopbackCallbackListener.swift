import NIOCore
import NIOHTTP1
import NIOPosix

/// The tiny HTTP/1.1 server on 127.0.0.1 that receives one login's redirect from the browser.
///
/// It binds an ephemeral port (the loopback client's redirect URI names it) or the configured
/// one, hands the query of `GET <path>` to `onCallback`, and answers the browser with a plain page saying whether the
/// login worked. Anything else gets 404. It is closed when the login ends.
final class LoopbackCallbackListener: Sendable {
    /// What the browser is told, once the daemon has handled the callback.
    struct Page: Sendable {
        var status: HTTPResponseStatus
        var text: String
    }

    let port: Int
    private let channel: any Channel

    private init(channel: any Channel, port: Int) {
        self.channel = channel
        self.port = port
    }

    /// Binds `host:port` (port nil: any free one) and answers `GET path`.
    static func start(host: String = "127.0.0.1", port: Int? = nil, path: String = "/callback",
                      onCallback: @escaping @Sendable (String) async -> Page) async throws -> LoopbackCallbackListener {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.configureHTTPServerPipeline(withErrorHandling: true)
                    try pipeline.addHandler(CallbackHandler(path: path, onCallback: onCallback))
                }
            }
            .bind(host: host, port: port ?? 0)
            .get()
        guard let port = channel.localAddress?.port else {
            try? await channel.close()
            throw ChannelError.unknownLocalAddress
        }
        return LoopbackCallbackListener(channel: channel, port: port)
    }

    func close() async {
        try? await channel.close()
    }
}

/// One request at a time: the head is kept, the body ignored, the answer written at the end.
private final class CallbackHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let path: String
    let onCallback: @Sendable (String) async -> LoopbackCallbackListener.Page
    private var head: HTTPRequestHead?

    init(path: String, onCallback: @escaping @Sendable (String) async -> LoopbackCallbackListener.Page) {
        self.path = path
        self.onCallback = onCallback
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let requestHead): head = requestHead
        case .body: break
        case .end:
            guard let head else { return }
            self.head = nil
            let (path, query) = Self.split(head.uri)
            guard head.method == .GET, path == self.path else {
                write(context: context, page: .init(status: .notFound, text: "Not found.\n"), keepAlive: head.isKeepAlive)
                return
            }
            let keepAlive = head.isKeepAlive
            let onCallback = self.onCallback
            let loopContext = NIOLoopBound(context, eventLoop: context.eventLoop)
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            let eventLoop = context.eventLoop
            Task {
                let page = await onCallback(query)
                eventLoop.execute { handler.value.write(context: loopContext.value, page: page, keepAlive: keepAlive) }
            }
        }
    }

    private func write(context: ChannelHandlerContext, page: LoopbackCallbackListener.Page, keepAlive: Bool) {
        var buffer = context.channel.allocator.buffer(capacity: page.text.utf8.count)
        buffer.writeString(page.text)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        headers.add(name: "Content-Length", value: "\(buffer.readableBytes)")
        headers.add(name: "Cache-Control", value: "no-store")
        headers.add(name: "Connection", value: keepAlive ? "keep-alive" : "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: page.status, headers: headers))),
                      promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        let channel = context.channel
        if !keepAlive { done.whenComplete { _ in channel.close(promise: nil) } }
    }

    private static func split(_ uri: String) -> (path: String, query: String) {
        guard let mark = uri.firstIndex(of: "?") else { return (uri, "") }
        return (String(uri[..<mark]), String(uri[uri.index(after: mark)...]))
    }
}
