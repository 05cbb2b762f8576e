import BlueskyHTTP
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A plain-http server on 127.0.0.1 whose answers depend on the path, for testing how a
/// client treats keep-alive, closes, slow and oversized answers:
/// - `/echo...`: 200, body `<method> <target> <connection number> <request body>`, keep-alive;
/// - `/close`: 200 with `Connection: close`;
/// - `/drop-next`: 200, then the next request on that connection is dropped unanswered
///   (the server's idle close racing a request);
/// - `/big`: 200 with a 4,096-byte body; `/silent`: never answers;
/// - `/half`: the head of a 4,096-byte answer and its first 2,048 bytes, then nothing;
/// - `/slow`: as `/echo`, 50 ms later (so that concurrent requests overlap);
/// - `/swallow-next`: 200, then the next request on that connection is read in full (and
///   counted) and the connection closed unanswered: the server may have acted on it;
/// - `/reset-next`: as `/swallow-next`, but the connection is reset (RST) instead of closed;
/// - `/hold`: 200, and the connection is kept for ``closeHeld()``;
/// - `/answer-then-close`: 200 without `Connection: close`, then the connection closed (a
///   server's idle close landing just after its answer);
/// - `/answer-early-then-close`: as `/answer-then-close`, but answered on the head, and the
///   connection closed once the request's body is in;
/// - `/refuse-unread`: 413 300 ms after the head, and nothing more read from the connection (kept open):
///   a server refusing an upload it will not take;
/// - `/stall-unread`: nothing answered and nothing more read (kept open).
///
/// Every request read in full is counted by method and target (``receipts(_:_:)``), so that
/// a test can tell from this side how often a request arrived.
final class ScriptedHTTPServer: Sendable {
    /// What the connections' handlers share with the test.
    fileprivate final class State: Sendable {
        let accepted = Atomic<Int>(0)
        let received = Mutex<[String: Int]>([:])
        let held = Mutex<[any Channel]>([])
    }

    private let channel: any Channel
    private let state: State
    let port: Int

    private init(channel: any Channel, state: State) {
        self.channel = channel
        self.state = state
        port = channel.localAddress?.port ?? 0
    }

    static func start() async throws -> ScriptedHTTPServer {
        let state = State()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                let number = state.accepted.add(1, ordering: .relaxed).newValue
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(ScriptedHandler(connectionNumber: number, state: state))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return ScriptedHTTPServer(channel: channel, state: state)
    }

    /// Connections accepted so far.
    var connections: Int { state.accepted.load(ordering: .relaxed) }

    /// How many `method target` requests were read in full, answered or not.
    func receipts(_ method: String, _ target: String) -> Int {
        state.received.withLock { $0["\(method) \(target)", default: 0] }
    }

    /// Closes the connections kept by `/hold` and returns, once they are closed, the client's
    /// port of each (its end of the connection).
    func closeHeld() async -> [Int] {
        let channels = state.held.withLock { held in
            defer { held.removeAll() }
            return held
        }
        var ports: [Int] = []
        for channel in channels {
            if let port = channel.remoteAddress?.port { ports.append(port) }
            try? await channel.close()
        }
        return ports
    }

    func stop() async {
        try? await channel.close()
    }
}

private final class ScriptedHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let connectionNumber: Int
    private let state: ScriptedHTTPServer.State
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var dropNext = false
    private var swallowNext = false
    private var resetNext = false

    init(connectionNumber: Int, state: ScriptedHTTPServer.State) {
        self.connectionNumber = connectionNumber
        self.state = state
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
            if requestHead.uri == "/answer-early-then-close" { answer(requestHead, context: context) }
            if requestHead.uri == "/refuse-unread" || requestHead.uri == "/stall-unread" {
                let channel = context.channel
                state.held.withLock { $0.append(channel) }
                channel.setOption(.autoRead, value: false).whenComplete { _ in }
                if requestHead.uri == "/refuse-unread" {
                    // Once the client's upload has filled the connection's buffers and waits.
                    let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                    context.eventLoop.scheduleTask(in: .milliseconds(300)) {
                        let (handler, context) = loopBound.value
                        let text = context.channel.allocator.buffer(string: "too large")
                        context.write(handler.wrapOutboundOut(.head(HTTPResponseHead(
                            version: .http1_1, status: .payloadTooLarge, headers: ["Content-Length": "9"]))), promise: nil)
                        context.write(handler.wrapOutboundOut(.body(.byteBuffer(text))), promise: nil)
                        context.writeAndFlush(handler.wrapOutboundOut(.end(nil)), promise: nil)
                    }
                }
            }
        case .body(let chunk):
            body += chunk.readableBytesView
        case .end:
            guard let requestHead = head else { return }
            head = nil
            state.received.withLock { $0["\(requestHead.method.rawValue) \(requestHead.uri)", default: 0] += 1 }
            if requestHead.uri == "/answer-early-then-close" {
                context.close(promise: nil)
                return
            }
            if swallowNext || resetNext {
                // A linger time of zero makes the close a reset.
                let linger = resetNext ? (context.channel as? any SocketOptionProvider)?.setSoLinger(linger(l_onoff: 1, l_linger: 0)) : nil
                let channel = context.channel
                (linger ?? context.eventLoop.makeSucceededVoidFuture()).whenComplete { _ in channel.close(promise: nil) }
                return
            }
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
        case "/half":
            headers.add(name: "Content-Length", value: "4096")
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
            let half = context.channel.allocator.buffer(string: String(repeating: "x", count: 2048))
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(half))), promise: nil)
            return
        case "/big":
            text = String(repeating: "x", count: 4096)
        case "/close":
            headers.add(name: "Connection", value: "close")
            text = "bye"
        case "/drop-next":
            dropNext = true
            text = "ok"
        case "/swallow-next":
            swallowNext = true
            text = "ok"
        case "/reset-next":
            resetNext = true
            text = "ok"
        case "/hold":
            let channel = context.channel
            state.held.withLock { $0.append(channel) }
            text = "ok"
        default:
            text = "\(request.method.rawValue) \(request.uri) \(connectionNumber) " + String(decoding: body, as: UTF8.self)
        }
        headers.add(name: "Content-Length", value: String(text.utf8.count))
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: text)))), promise: nil)
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if request.uri == "/close" || request.uri == "/answer-then-close" {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}

extension HTTPFetching {
    /// The tests' exchanges, with a deadline long enough that only a test of deadlines meets it.
    func send(_ request: OutboundRequest) async throws(HTTPError) -> InboundResponse {
        try await send(request, timeout: .seconds(30))
    }
}
