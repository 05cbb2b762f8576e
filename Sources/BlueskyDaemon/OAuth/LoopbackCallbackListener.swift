import NIOCore
import Synchronization
import NIOHTTP1
import NIOPosix

/// The tiny HTTP/1.1 server on 127.0.0.1 that receives one login's redirect from the browser.
///
/// It binds an ephemeral port (the loopback client's redirect URI names it) or the configured
/// one, hands the query of `GET <path>` to `onCallback`, and answers the browser with a plain
/// page saying whether the login worked. Anything else gets 404. Each login holds one of these
/// and closes it when it ends. A configured, fixed port is shared by the logins in progress
/// (the callback finds its login by `state`), so a second login, or one started while an
/// abandoned one still waits, does not find the port taken by blueskyd itself.
final class LoopbackCallbackListener: Sendable {
    /// What the browser is told, once the daemon has handled the callback.
    struct Page: Sendable {
        var status: HTTPResponseStatus
        var text: String
    }

    let port: Int
    private let channel: any Channel
    /// The key of a shared fixed-port listener; nil for a login's own ephemeral one.
    private let sharedKey: String?
    private let closed = Atomic(false)

    private init(channel: any Channel, port: Int, sharedKey: String?) {
        self.channel = channel
        self.port = port
        self.sharedKey = sharedKey
    }

    /// Binds `host:port` (port nil: any free one) and answers `GET path`; with a fixed port,
    /// joins the listener already bound there, if any.
    static func start(host: String = "127.0.0.1", port: Int? = nil, path: String = "/callback",
                      onCallback: @escaping @Sendable (String) async -> Page) async throws -> LoopbackCallbackListener {
        guard let port else {
            let (channel, bound) = try await bind(host: host, port: 0, path: path, onCallback: onCallback)
            return LoopbackCallbackListener(channel: channel, port: bound, sharedKey: nil)
        }
        let key = "\(host) \(port) \(path)"
        let (channel, bound) = try await SharedListeners.registry.acquire(key) {
            try await bind(host: host, port: port, path: path, onCallback: onCallback)
        }
        return LoopbackCallbackListener(channel: channel, port: bound, sharedKey: key)
    }

    private static func bind(host: String, port: Int, path: String,
                             onCallback: @escaping @Sendable (String) async -> Page) async throws -> (any Channel, Int) {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.configureHTTPServerPipeline(withErrorHandling: true)
                    try pipeline.addHandler(CallbackHandler(path: path, onCallback: onCallback))
                }
            }
            .bind(host: host, port: port)
            .get()
        guard let port = channel.localAddress?.port else {
            try? await channel.close()
            throw ChannelError.unknownLocalAddress
        }
        return (channel, port)
    }

    /// Ends this login's use of the listener (once, however often called); a shared one closes
    /// with its last login.
    func close() async {
        guard closed.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged else { return }
        if let sharedKey {
            await SharedListeners.registry.release(sharedKey)
        } else {
            try? await channel.close()
        }
    }
}

/// Fixed-port listeners and how many logins use each. A bind in progress is shared too, so two
/// logins starting at once do not both try the port.
private actor SharedListeners {
    static let registry = SharedListeners()

    private struct Entry {
        let binding: Task<(any Channel, Int), any Error>
        var users: Int
    }

    private var entries: [String: Entry] = [:]
    /// Listeners whose last login ended, until their port is free again.
    private var closing: [String: Task<Void, Never>] = [:]

    func acquire(_ key: String, bind: @escaping @Sendable () async throws -> (any Channel, Int)) async throws -> (any Channel, Int) {
        while let pending = closing[key] {
            await pending.value
            if closing[key] == pending { closing[key] = nil }
        }
        if entries[key] == nil { entries[key] = Entry(binding: Task { try await bind() }, users: 0) }
        entries[key]!.users += 1
        let binding = entries[key]!.binding
        do {
            return try await binding.value
        } catch {
            await release(key)
            throw error
        }
    }

    func release(_ key: String) async {
        guard var entry = entries[key] else { return }
        entry.users -= 1
        guard entry.users == 0 else { return entries[key] = entry }
        entries[key] = nil
        let close = Task {
            if let (channel, _) = try? await entry.binding.value { try? await channel.close() }
        }
        closing[key] = close
        await close.value
        if closing[key] == close { closing[key] = nil }
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
                write(context: context, page: .init(status: .notFound, text: "Not found.\n"), keepAlive: false)
                return
            }
            // A login's redirect is one request: close the connection after it, so that no
            // browser connection outlives the listener.
            let keepAlive = false
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
