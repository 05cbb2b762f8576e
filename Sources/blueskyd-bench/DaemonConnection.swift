import Foundation
import NIOCore
import NIOPosix

/// The promises of the requests in flight on one connection, completed in order (blueskyd's
/// sockets answer a connection's requests in order), all failed when the connection ends.
/// Completing a promise runs its callbacks at once, which may write the next request (and
/// append here): each is taken out first, and completed outside the mutation.
final class PendingAnswers<Value: Sendable> {
    private var waiting = CircularBuffer<EventLoopPromise<Value>>()

    func append(_ promise: EventLoopPromise<Value>) { waiting.append(promise) }

    func succeedFirst(_ value: Value) { waiting.popFirst()?.succeed(value) }

    func failAll(_ error: any Error) {
        while let promise = waiting.popFirst() { promise.fail(error) }
    }
}

/// A request line for the daemon and the promise its reply line completes.
struct PendingReply: Sendable {
    let line: ByteBuffer
    let reply: EventLoopPromise<ByteBuffer>
}

/// Frames the daemon's replies by newline and completes the writers' promises in order
/// (blueskyd answers in request order on each connection, so no id matching is needed).
final class ReplyLineHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = PendingReply
    typealias OutboundOut = ByteBuffer

    private let waiting = PendingAnswers<ByteBuffer>()
    private var partial: ByteBuffer?

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let request = unwrapOutboundIn(data)
        waiting.append(request.reply)
        context.write(wrapOutboundOut(request.line), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        if var pending = partial {
            pending.writeBuffer(&buffer)
            buffer = pending
            partial = nil
        }
        while true {
            let view = buffer.readableBytesView
            guard let newline = view.firstIndex(of: UInt8(ascii: "\n")) else { break }
            let line = buffer.readSlice(length: newline - view.startIndex)!
            buffer.moveReaderIndex(forwardBy: 1)
            waiting.succeedFirst(line)
        }
        if buffer.readableBytes > 0 { partial = buffer }
    }

    func channelInactive(context: ChannelHandlerContext) {
        waiting.failAll(ChannelError.eof)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        waiting.failAll(error)
        context.close(promise: nil)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        waiting.failAll(ChannelError.ioOnClosedChannel)
    }

    /// Connects to blueskyd's socket, with this handler framing the replies.
    static func connect(socketPath: String, group: any EventLoopGroup) async throws -> any Channel {
        do {
            return try await ClientBootstrap(group: group)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(ReplyLineHandler())
                    }
                }
                .connect(unixDomainSocketPath: socketPath).get()
        } catch {
            throw BenchError.connectionFailed("\(socketPath): \(describe(error))")
        }
    }

    /// Writes one request line on a channel made by `connect`; the future completes with its
    /// reply line.
    static func call(_ line: ByteBuffer, on channel: any Channel) -> EventLoopFuture<ByteBuffer> {
        let reply = channel.eventLoop.makePromise(of: ByteBuffer.self)
        let written = channel.eventLoop.makePromise(of: Void.self)
        // A write that never reaches the handler (closed channel) must still end the call.
        written.futureResult.whenFailure { reply.fail($0) }
        channel.writeAndFlush(PendingReply(line: line, reply: reply), promise: written)
        return reply.futureResult
    }
}

/// One connection to blueskyd's socket, sending a fixed request line.
struct DaemonEndpoint: BenchEndpoint {
    let channel: any Channel
    let requestLine: ByteBuffer

    static func connect(socketPath: String, requestLine: ByteBuffer, group: any EventLoopGroup) async throws
        -> DaemonEndpoint
    {
        DaemonEndpoint(channel: try await ReplyLineHandler.connect(socketPath: socketPath, group: group),
                       requestLine: requestLine)
    }

    var eventLoop: any EventLoop { channel.eventLoop }

    func callOnce() -> EventLoopFuture<Bool> {
        ReplyLineHandler.call(requestLine, on: channel).map { ReplyCheck.isUpstreamOK($0) }
    }

    func close() async {
        try? await channel.close()
    }
}

/// Recognises a successful proxied call without parsing the whole reply.
enum ReplyCheck {
    private static let marker = Array(#""status":200"#.utf8)
    private static let errorMarker = Array(#""error":{"#.utf8)

    /// True when the reply is a result (not a JSON-RPC error) holding upstream status 200.
    static func isUpstreamOK(_ line: ByteBuffer) -> Bool {
        line.withUnsafeReadableBytes { bytes in
            contains(bytes, marker) && !startsWithError(bytes)
        }
    }

    private static func startsWithError(_ bytes: UnsafeRawBufferPointer) -> Bool {
        // A JSON-RPC error reply has no "result"; the upstream body itself could hold "error".
        !contains(bytes, Array(#""result":"#.utf8)) && contains(bytes, errorMarker)
    }

    static func contains(_ haystack: UnsafeRawBufferPointer, _ needle: [UInt8]) -> Bool {
        guard let first = needle.first, haystack.count >= needle.count else { return false }
        var index = 0
        let last = haystack.count - needle.count
        while index <= last {
            if haystack[index] == first {
                var matched = 1
                while matched < needle.count, haystack[index + matched] == needle[matched] { matched += 1 }
                if matched == needle.count { return true }
            }
            index += 1
        }
        return false
    }
}
