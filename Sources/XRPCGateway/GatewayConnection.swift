import BlueskyHTTP
import Logging
import NIOCore
import NIOHTTP1
import RPCServer
import Synchronization

/// One client connection: requests answered one after another (keep-alive), each admitted
/// first. A refused request, a broken message, a streamed body the answer did not read to its
/// end, or an answer cut off ends the connection.
struct GatewayConnection: Sendable {
    let channel: NIOAsyncChannel<HTTPServerRequestPart, Never>
    let peer: PeerCredentials?
    let loopbackSocket: LoopbackClientSocket?
    let handler: any GatewayHandler
    let admission: GatewayAdmission
    /// Bodies up to this many bytes are held whole; larger ones, or of unknown length, stream.
    let wholeBodyLimit: Int
    let refused: (@Sendable (GatewayRefusal) -> Void)?
    let isShuttingDown: @Sendable () -> Bool
    let logger: Logger

    func serve() async {
        do {
            try await channel.executeThenClose { inbound in
                let parts = RequestParts(inbound.makeAsyncIterator())
                while let part = try await parts.next() {
                    guard case .head(let head) = part else { return }
                    guard try await answer(head, parts: parts) else { return }
                }
            }
        } catch {
            logger.debug("gateway connection ended", metadata: ["error": "\(error)"])
        }
    }

    /// Answers the request `head` begins; false when the connection must end after it.
    private func answer(_ head: HTTPRequestHead, parts: RequestParts) async throws -> Bool {
        if let refusal = admission.refusal(of: head, peer: peer) {
            logger.notice("gateway refused a request", metadata: [
                "reason": "\(refusal)", "pid": "\(peer.flatMap { $0.pid > 0 ? String($0.pid) : nil } ?? "?")",
            ])
            refused?(refusal)
            try await write(refusal.response, for: head, keepAlive: false)
            return false
        }
        let length = head.headers.first(name: "content-length").flatMap(Int.init)
        let chunked = head.headers[canonicalForm: "transfer-encoding"].contains { $0.lowercased() == "chunked" }
        let body: GatewayRequestBody
        if chunked || (length ?? 0) > wholeBodyLimit {
            body = .streamed(ChunkSource(length: chunked ? nil : length) { try await parts.nextBodyChunk() })
        } else {
            guard let whole = try await parts.wholeBody() else { return false }  // the client left mid-request
            body = .whole(whole)
        }
        var request = GatewayRequest(method: head.method, uri: head.uri, headers: head.headers, body: body, peer: peer)
        request.loopbackSocket = loopbackSocket
        let response = await handler.respond(to: request)
        // A streamed body the handler did not read to its end leaves the connection mid-message.
        let keepAlive = head.isKeepAlive && !isShuttingDown() && parts.atMessageEnd
        try await write(response, for: head, keepAlive: keepAlive)
        return keepAlive
    }

    private func write(_ response: GatewayResponse, for request: HTTPRequestHead, keepAlive: Bool) async throws {
        var headers = HTTPHeaders()
        for (name, value) in response.headers { headers.add(name: name, value: value) }
        if !keepAlive { headers.replaceOrAdd(name: "connection", value: "close") }
        let connection = channel.channel
        switch response.body {
        case .whole(let body):
            headers.replaceOrAdd(name: "content-length", value: String(body.readableBytes))
            connection.write(HTTPServerResponsePart.head(HTTPResponseHead(version: request.version, status: response.status,
                                                                         headers: headers)), promise: nil)
            if request.method != .HEAD, body.readableBytes > 0 {
                connection.write(HTTPServerResponsePart.body(.byteBuffer(body)), promise: nil)
            }
            try await connection.writeAndFlush(HTTPServerResponsePart.end(nil))
        case .streamed(let source, let stallTimeout):
            // Without a length, HTTP/1.1 answers go out chunked.
            headers.remove(name: "content-length")
            if let length = source.length { headers.add(name: "content-length", value: String(length)) }
            // The head goes out at once: a client waiting on a slow body already knows the status.
            connection.writeAndFlush(HTTPServerResponsePart.head(HTTPResponseHead(version: request.version, status: response.status,
                                                                                 headers: headers)), promise: nil)
            try await Self.pass(source, to: connection, stallTimeout: stallTimeout, skipBody: request.method == .HEAD)
        }
    }

    /// Writes `source` chunk by chunk, each flushed before the next is read (so at most one
    /// chunk is held), and cuts off an answer whose next chunk does not come within
    /// `stallTimeout` (the thrown error closes the connection: the client sees it end early).
    static func pass(_ source: ChunkSource, to connection: any Channel, stallTimeout: Duration, skipBody: Bool) async throws {
        let progress = ProgressMark()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                var chunks = source.makeAsyncIterator()
                while let chunk = try await chunks.next() {
                    progress.touch()
                    if !skipBody { try await connection.writeAndFlush(HTTPServerResponsePart.body(.byteBuffer(chunk))) }
                    // A client that reads slowly is not a stalled server: its writes count as progress.
                    progress.touch()
                }
                try await connection.writeAndFlush(HTTPServerResponsePart.end(nil))
            }
            group.addTask {
                while true {
                    try await Task.sleep(for: stallTimeout / 4)
                    if progress.silence > stallTimeout { throw AnswerStalled() }
                }
            }
            defer { group.cancelAll() }
            try await group.next()
        }
    }
}

/// The server's answer stopped coming: it is cut off.
struct AnswerStalled: Error, CustomStringConvertible {
    var description: String { "the server's answer stalled" }
}

/// The connection's request parts, read by one reader at a time: the connection's task, or
/// while a handler runs, whoever reads a streamed body (the upstream client).
final class RequestParts: @unchecked Sendable {
    // Never read concurrently: the connection waits for its handler, which owns the reads of a
    // streamed body until the answer is written.
    private var iterator: NIOAsyncChannelInboundStream<HTTPServerRequestPart>.AsyncIterator
    /// True between messages: the last request's end was read. Atomic: the connection reads it
    /// once the answer is written, while an upload's reader may still be waiting on the client.
    private let messageEnded = Atomic(true)
    var atMessageEnd: Bool { messageEnded.load(ordering: .acquiring) }

    init(_ iterator: NIOAsyncChannelInboundStream<HTTPServerRequestPart>.AsyncIterator) {
        self.iterator = iterator
    }

    /// The next part; a head starts a message.
    func next() async throws -> HTTPServerRequestPart? {
        let part = try await iterator.next()
        switch part {
        case .head: messageEnded.store(false, ordering: .releasing)
        case .end: messageEnded.store(true, ordering: .releasing)
        case .body, nil: break
        }
        return part
    }

    /// The next chunk of the current request's body, nil at its end.
    func nextBodyChunk() async throws -> ByteBuffer? {
        guard !atMessageEnd else { return nil }
        switch try await next() {
        case .body(let chunk): return chunk
        case .end: return nil
        case .head, nil: throw RequestEndedEarly()
        }
    }

    /// The rest of the current request's body, whole; nil when the client left before its end.
    func wholeBody() async throws -> ByteBuffer? {
        var body = ByteBuffer()
        while true {
            switch try await next() {
            case .body(var chunk): body.writeBuffer(&chunk)
            case .end: return body
            case .head, nil: return nil
            }
        }
    }
}

/// The client's request ended before its body did.
struct RequestEndedEarly: Error, CustomStringConvertible {
    var description: String { "the request ended before its body" }
}
