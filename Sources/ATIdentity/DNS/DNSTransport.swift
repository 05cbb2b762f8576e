import NIOCore
import NIOPosix

/// One DNS exchange with one server over UDP or TCP, on NIO's event loops (no thread of the
/// Swift concurrency pool ever blocks on a socket).
enum DNSTransport {
    struct TimedOut: Error, CustomStringConvertible {
        let after: Duration
        var description: String { "no answer within \(after)" }
    }

    struct ConnectionClosed: Error, CustomStringConvertible {
        var description: String { "the server closed the connection before answering" }
    }

    struct MismatchedAnswer: Error, CustomStringConvertible {
        var description: String { "the answer does not match the question asked" }
    }

    /// Sends `query` over a connected UDP socket and waits for the matching answer. Datagrams
    /// with another id or question are ignored (spoofing or stale answers), not accepted.
    static func exchangeOverUDP(_ query: DNSQuery, with server: SocketAddress, timeout: Duration) async throws -> DNSResponse {
        let message = try query.encoded()
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        let promise = eventLoop.makePromise(of: DNSResponse.self)
        let channel: any Channel
        do {
            channel = try await DatagramBootstrap(group: eventLoop)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(UDPAnswerHandler(query: query, promise: promise))
                    }
                }
                .connect(to: server).get()
        } catch {
            promise.fail(error)
            throw error
        }
        defer { channel.close(promise: nil) }
        return try await awaitAnswer(promise, timeout: timeout) {
            channel.writeAndFlush(ByteBuffer(bytes: message)).whenFailure { promise.fail($0) }
        }
    }

    /// Sends `query` over TCP (two-byte length prefix, RFC 1035 §4.2.2) and reads one answer.
    static func exchangeOverTCP(_ query: DNSQuery, with server: SocketAddress, timeout: Duration) async throws -> DNSResponse {
        let message = try query.encoded()
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        let promise = eventLoop.makePromise(of: DNSResponse.self)
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: eventLoop)
                .connectTimeout(TimeAmount(timeout))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(TCPAnswerHandler(query: query, promise: promise))
                    }
                }
                .connect(to: server).get()
        } catch {
            promise.fail(error)
            throw error
        }
        defer { channel.close(promise: nil) }
        var framed = ByteBuffer()
        framed.writeInteger(UInt16(message.count))
        framed.writeBytes(message)
        return try await awaitAnswer(promise, timeout: timeout) {
            channel.writeAndFlush(framed).whenFailure { promise.fail($0) }
        }
    }

    private static func awaitAnswer(
        _ promise: EventLoopPromise<DNSResponse>, timeout: Duration, send: () -> Void
    ) async throws -> DNSResponse {
        let timer = promise.futureResult.eventLoop.scheduleTask(in: TimeAmount(timeout)) {
            promise.fail(TimedOut(after: timeout))
        }
        defer { timer.cancel() }
        send()
        return try await withTaskCancellationHandler {
            try await promise.futureResult.get()
        } onCancel: {
            promise.fail(CancellationError())
        }
    }
}

/// Completes the promise with the first datagram that answers the query.
private final class UDPAnswerHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>

    private let query: DNSQuery
    private let promise: EventLoopPromise<DNSResponse>

    init(query: DNSQuery, promise: EventLoopPromise<DNSResponse>) {
        self.query = query
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let datagram = unwrapInboundIn(data).data
        guard let response = try? DNSResponse(parsing: Array(datagram.readableBytesView)),
              response.answers(query) else { return }
        promise.succeed(response)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // On a connected UDP socket this is mostly "connection refused" (ICMP port unreachable).
        promise.fail(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(DNSTransport.ConnectionClosed())
    }
}

/// Collects one length-prefixed DNS message from a TCP stream.
private final class TCPAnswerHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let query: DNSQuery
    private let promise: EventLoopPromise<DNSResponse>
    private var received = ByteBuffer()

    init(query: DNSQuery, promise: EventLoopPromise<DNSResponse>) {
        self.query = query
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var chunk = unwrapInboundIn(data)
        received.writeBuffer(&chunk)
        guard let length = received.getInteger(at: received.readerIndex, as: UInt16.self),
              let message = received.getBytes(at: received.readerIndex + 2, length: Int(length)) else { return }
        do {
            let response = try DNSResponse(parsing: message)
            guard response.answers(query) else { throw DNSTransport.MismatchedAnswer() }
            promise.succeed(response)
        } catch {
            promise.fail(error)
        }
        context.close(promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(DNSTransport.ConnectionClosed())
    }
}
