import NIOCore
import NIOHTTP1

/// Why one exchange on a keep-alive connection failed, before it becomes an ``HTTPError``.
enum HTTP1ExchangeFailure: Error {
    /// The connection was found closed before any byte of the request was written: the server
    /// cannot have seen it, so it may go to another connection whatever its method.
    case notSent
    /// The connection closed or was reset after the request was written (perhaps only in part)
    /// and before any byte of the answer. On a reused connection this is usually the server's
    /// idle close crossing our request, but the server may also have received it and acted on
    /// it: only an idempotent request may be sent again (see ``allowsRetry(of:)``).
    case closedBeforeResponse
    case closedMidResponse
    case bodyTooLarge
    case timedOut
    case transport(any Error)
}

/// The last handler of a client connection: writes one request at a time and collects its
/// whole response. Every method runs on the channel's event loop.
final class HTTP1ExchangeHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    /// The exchange in progress; at most one, since requests are not pipelined.
    private struct Pending {
        var promise: EventLoopPromise<InboundResponse>
        var maxBodyBytes: Int
        var head: HTTPResponseHead?
        var body: ByteBuffer?
        var keepAlive: Bool
        var timeout: Scheduled<Void>?
    }

    private var context: ChannelHandlerContext?
    private var pending: Pending?
    /// Called once the connection can take the next request (the answer ended with keep-alive).
    var onReusable: (() -> Void)?
    /// Called when the channel goes away, so the pool forgets it.
    var onClosed: (() -> Void)?

    var isBusy: Bool { pending != nil }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    /// Writes `head` (and `body`) and completes `promise` with the answer.
    func start(head: HTTPRequestHead, body: ByteBuffer?, maxBodyBytes: Int, timeout: TimeAmount,
               promise: EventLoopPromise<InboundResponse>) {
        guard let context, pending == nil else {
            promise.fail(HTTP1ExchangeFailure.notSent)
            return
        }
        // Checked before the first byte goes out: a close seen only afterwards is ambiguous.
        guard context.channel.isActive else {
            promise.fail(HTTP1ExchangeFailure.notSent)
            context.close(promise: nil)
            return
        }
        let deadline = context.eventLoop.scheduleTask(in: timeout) { [weak self] () -> Void in
            guard let self else { return }
            self.fail(.timedOut, close: true)
        }
        pending = Pending(promise: promise, maxBodyBytes: maxBodyBytes, keepAlive: head.isKeepAlive,
                          timeout: deadline)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if let body, body.readableBytes > 0 {
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard var exchange = pending else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            exchange.head = head
            exchange.keepAlive = exchange.keepAlive && head.isKeepAlive
            pending = exchange
        case .body(var chunk):
            let received = (exchange.body?.readableBytes ?? 0) + chunk.readableBytes
            guard received <= exchange.maxBodyBytes else {
                fail(.bodyTooLarge, close: true)
                return
            }
            if exchange.body == nil {
                exchange.body = chunk
            } else {
                exchange.body!.writeBuffer(&chunk)
            }
            pending = exchange
        case .end:
            pending = nil
            exchange.timeout?.cancel()
            guard let head = exchange.head else {
                exchange.promise.fail(HTTP1ExchangeFailure.closedMidResponse)
                context.close(promise: nil)
                return
            }
            let response = InboundResponse(
                status: Int(head.status.code),
                headers: head.headers.map { ($0.name, $0.value) },
                body: exchange.body.map { Array($0.readableBytesView) } ?? [])
            if exchange.keepAlive {
                onReusable?()
            } else {
                context.close(promise: nil)
            }
            exchange.promise.succeed(response)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        // The pool first, so that a retry of the failed exchange finds this one no longer counted.
        let closed = onClosed
        onClosed = nil
        onReusable = nil
        closed?()
        fail(.closedBeforeResponse, close: false)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A reset is the server going away as surely as a close is, and judged the same way.
        fail(Self.isReset(error) ? .closedBeforeResponse : .transport(error), close: true)
    }

    /// Ends the exchange in progress, if any; a half-received answer is never passed on.
    private func fail(_ failure: HTTP1ExchangeFailure, close: Bool) {
        if let exchange = pending {
            pending = nil
            exchange.timeout?.cancel()
            let reported: HTTP1ExchangeFailure =
                if case .closedBeforeResponse = failure, exchange.head != nil || exchange.body != nil {
                    .closedMidResponse
                } else {
                    failure
                }
            exchange.promise.fail(reported)
        }
        if close { context?.close(promise: nil) }
    }
}
