import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A plain-http server on 127.0.0.1 whose answers depend on the path, for testing how a
/// client treats keep-alive, closes, slow and oversized answers:
/// - `/echo...`: 200, body `<method> <target> <connection number> <request body>`, keep-alive;
/// - `/close`: 200 with `Connection: close`;
/// - `/drop-next`: 200, then the next request on that connection is dropped unanswered
///   (the server's idle close racing a request);
/// - `/big`: 200 with a 4,096-byte body; `/silent`: never answers;
/// - `/slow`: as `/echo`, 50 ms later (so that concurrent requests overlap).
final class ScriptedHTTPServer: Sendable {
    private let channel: any Channel
    private let accepted = Atomic<Int>(0)
    let port: Int

    private init(channel: any Channel) {
        self.channel = channel
        port = channel.localAddress?.port ?? 0
    }

    static func start() async throws -> ScriptedHTTPServer {
        let counter = Box()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                let number = counter.next()
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(ScriptedHandler(connectionNumber: number))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        let server = ScriptedHTTPServer(channel: channel)
        counter.server = server
        return server
    }

    /// Connections accepted so far.
    var connections: Int { accepted.load(ordering: .relaxed) }

    func stop() async {
        try? await channel.close()
    }

    fileprivate func countConnection() -> Int { accepted.add(1, ordering: .relaxed).newValue }

    private final class Box: @unchecked Sendable {
        weak var server: ScriptedHTTPServer?
        func next() -> Int { server?.countConnection() ?? 0 }
    }
}

private final class ScriptedHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let connectionNumber: Int
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var dropNext = false

    init(connectionNumber: Int) {
        self.connectionNumber = connectionNumber
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let requestHead):
            if dropNext {
                context.close(promise: nil)
                return
            }
            head = requestHead
            body = []
        case .body(let chunk):
            body += chunk.readableBytesView
        case .end:
            guard let requestHead = head else { return }
            head = nil
            if requestHead.uri == "/slow" {
                let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: .milliseconds(50)) {
                    let (handler, context) = loopBound.value
                    handler.answer(requestHead, context: context)
                }
                return
            }
            answer(requestHead, context: context)
        }
    }

    private func answer(_ request: HTTPRequestHead, context: ChannelHandlerContext) {
        var headers = HTTPHeaders([("Content-Type", "text/plain")])
        var text = ""
        switch request.uri {
        case "/silent":
            return
        case "/big":
            text = String(repeating: "x", count: 4096)
        case "/close":
            headers.add(name: "Connection", value: "close")
            text = "bye"
        case "/drop-next":
            dropNext = true
            text = "ok"
        default:
            text = "\(request.method.rawValue) \(request.uri) \(connectionNumber) " + String(decoding: body, as: UTF8.self)
        }
        headers.add(name: "Content-Length", value: String(text.utf8.count))
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: text)))), promise: nil)
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if request.uri == "/close" {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}
