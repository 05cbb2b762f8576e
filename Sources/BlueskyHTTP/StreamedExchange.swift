import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import Synchronization

/// A request body sent as it is read, never held whole (a blob upload through the gateway).
public struct ChunkSource: AsyncSequence, Sendable {
    public typealias Element = ByteBuffer

    private let pull: @Sendable () async throws -> ByteBuffer?
    /// The body's length when the client said it (`Content-Length`).
    public let length: Int?

    /// `pull` gives the next chunk, nil at the end; it is called by one reader at a time.
    public init(length: Int?, pull: @escaping @Sendable () async throws -> ByteBuffer?) {
        self.length = length
        self.pull = pull
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let pull: @Sendable () async throws -> ByteBuffer?
        public mutating func next() async throws -> ByteBuffer? { try await pull() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(pull: pull) }
}

/// An answer whose body is read as it arrives (a CAR export, a blob).
public struct StreamedAnswer: Sendable {
    public var status: Int
    /// Header names as the server sent them.
    public var headers: [(String, String)]
    public var body: AnswerBody

    /// The first value of header `name`, compared case-insensitively.
    public func header(_ name: String) -> String? {
        InboundResponse(status: status, headers: headers, body: []).header(name)
    }

    /// `Content-Length`, when the server gave it.
    public var length: Int? { header("content-length").flatMap(Int.init) }

    /// The whole answer, for a small one (an error body) that must be read before deciding,
    /// read within `timeout`: a body that stalls after its head is given up (the read is
    /// cancelled, which closes the connection).
    public func collected(upTo limit: Int, timeout: Duration) async throws -> InboundResponse {
        let body = self.body
        let bytes = try await withThrowingTaskGroup(of: [UInt8]?.self) { group in
            group.addTask {
                var buffer = try await body.collect(upTo: limit)
                return buffer.readBytes(length: buffer.readableBytes) ?? []
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
        guard let bytes else { throw AnswerBodyTimedOut(timeout: timeout) }
        return InboundResponse(status: status, headers: headers, body: bytes)
    }
}

extension OutboundHTTP {
    /// Sends `request` with `upload` as its body, read as it is sent, and returns at the
    /// answer's head, its body still to be read.
    ///
    /// The deadline follows progress, not the clock alone: the upload must keep moving (no
    /// `timeout` without a chunk read from it or taken by the connection), and the head must
    /// come within `timeout` of the upload's end (of the start, without one). Whoever reads the
    /// body bounds its stalls too.
    ///
    /// Both bodies are held a few chunks at a time, whatever the two sides' speeds: the exchange
    /// runs on its connection's event loop, the upload's next chunk is read once the connection
    /// has taken the last one (and has room for more), and the answer's next part is read from
    /// the server once its reader has taken the ones before. (async-http-client's async API
    /// hands each chunk to the loop without waiting for it, so a fast client and a busy loop
    /// piled tens of megabytes of an upload up in memory: GatewayStreamingTests.)
    public func stream(_ request: OutboundRequest, upload: ChunkSource?, timeout: Duration) async throws(HTTPError)
        -> StreamedAnswer
    {
        let url = try configuration.policy.check(request.url)
        let progress = ProgressMark()
        let loop = client.eventLoopGroup.next()
        let delegate = StreamedAnswerDelegate(loop: loop)
        let prepared: HTTPClient.Request
        do {
            var headers = HTTPHeaders()
            for (name, value) in request.headers { headers.add(name: name, value: value) }
            let body: HTTPClient.Body?
            if let upload {
                body = .stream(contentLength: upload.length.map { Int64($0) }) { writer in
                    Self.pump(upload, into: writer, through: delegate, progress: progress)
                }
            } else {
                body = request.body.map { .bytes($0) }
            }
            prepared = try HTTPClient.Request(url: url, method: HTTPMethod(rawValue: request.method), headers: headers, body: body)
        } catch {
            delegate.abandon(error)
            throw .unreachable(Self.redacted(url), reason: String(describing: error))
        }
        let body = delegate.makeBody()
        let task = client.execute(request: prepared, delegate: delegate, eventLoop: .delegateAndChannel(on: loop))
        delegate.started(task)
        do {
            let head = try await withThrowingTaskGroup(of: HTTPResponseHead?.self) { group in
                group.addTask {
                    try await withTaskCancellationHandler {
                        try await delegate.head.futureResult.get()
                    } onCancel: {
                        task.cancel()
                    }
                }
                group.addTask {
                    // Wakes four times per timeout: a stall is noticed within 1.25 timeouts.
                    while true {
                        try await Task.sleep(for: timeout / 4)
                        if progress.silence > timeout { return nil }
                    }
                }
                defer { group.cancelAll() }
                return try await group.next() ?? nil
            }
            // A stall: the group's cancelling the head's wait has cancelled the exchange.
            guard let head else { throw HTTPError.timedOut(Self.redacted(url)) }
            return StreamedAnswer(status: Int(head.status.code), headers: head.headers.map { ($0.name, $0.value) }, body: body)
        } catch let error as HTTPError {
            throw error
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .connectTimeout || error == .readTimeout {
            throw .timedOut(Self.redacted(url))
        } catch {
            throw .unreachable(Self.redacted(url), reason: String(describing: error))
        }
    }

    /// Writes `upload` chunk by chunk, each read once the connection has taken the one before
    /// (at once while it has room), until the upload ends or the exchange does.
    private static func pump(_ upload: ChunkSource, into writer: HTTPClient.Body.StreamWriter,
                             through delegate: StreamedAnswerDelegate, progress: ProgressMark) -> EventLoopFuture<Void>
    {
        let done = delegate.loop.makePromise(of: Void.self)
        done.completeWithTask {
            var chunks = upload.makeAsyncIterator()
            while let chunk = try await chunks.next() {
                progress.touch()
                try await delegate.write(chunk, with: writer).get()
                progress.touch()
            }
        }
        return done.futureResult
    }
}

extension ChunkSource {
    /// The body of a streamed answer, passed on as it arrives.
    public init(_ answer: StreamedAnswer) {
        let reader = BodyReader(answer.body.makeAsyncIterator())
        self.init(length: answer.length) { try await reader.next() }
    }
}

/// One reader's iterator, shared by reference so that a `ChunkSource` can pull from it.
private final class BodyReader: @unchecked Sendable {
    // Read by one consumer at a time (the writer of the answer), never concurrently.
    private var iterator: AnswerBody.AsyncIterator

    init(_ iterator: AnswerBody.AsyncIterator) {
        self.iterator = iterator
    }

    func next() async throws -> ByteBuffer? {
        try await iterator.next()
    }
}

/// When a stream last moved: read by a watchdog that cuts off a stalled exchange.
public final class ProgressMark: Sendable {
    private let last = Mutex(ContinuousClock.now)

    public init() {}

    /// Something moved now.
    public func touch() {
        last.withLock { $0 = .now }
    }

    /// How long since something last moved.
    public var silence: Duration {
        ContinuousClock.now - last.withLock { $0 }
    }
}

/// A streamed answer's body did not come within its deadline.
public struct AnswerBodyTimedOut: Error, CustomStringConvertible {
    public var timeout: Duration
    public var description: String { "the answer's body did not come within \(timeout)" }
}
