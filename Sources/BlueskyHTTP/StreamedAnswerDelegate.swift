import AsyncHTTPClient
import NIOCore
import NIOHTTP1

/// A streamed answer's body, read as it arrives: the server's next part is read only once the
/// reader has taken the ones before it (a few parts are held at most), and a reader that goes
/// away (dropped, cancelled) ends the exchange, closing its connection.
public struct AnswerBody: AsyncSequence, Sendable {
    public typealias Element = ByteBuffer
    typealias Parts = NIOThrowingAsyncSequenceProducer<
        ByteBuffer, any Error, NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark, StreamedAnswerDelegate
    >

    let parts: Parts

    public struct AsyncIterator: AsyncIteratorProtocol {
        var parts: Parts.AsyncIterator
        public mutating func next() async throws -> ByteBuffer? { try await parts.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(parts: parts.makeAsyncIterator()) }

    /// The whole body, for a small one; more than `limit` bytes is an error.
    public func collect(upTo limit: Int) async throws -> ByteBuffer {
        var whole = ByteBuffer()
        for try await var part in self {
            guard whole.readableBytes + part.readableBytes <= limit else { throw NIOTooManyBytesError(maxBytes: limit) }
            whole.writeBuffer(&part)
        }
        return whole
    }
}

/// Receives one streamed exchange's answer for async-http-client on the connection's event
/// loop, and hands its head and body parts on.
///
/// Its state is touched on `loop` only: async-http-client calls a delegate on the task's event
/// loop, which `OutboundHTTP.stream` makes the connection's, and the body's reader side
/// (`produceMore`, `didTerminate`, called from any thread) hops there.
final class StreamedAnswerDelegate: HTTPClientResponseDelegate, NIOAsyncSequenceProducerDelegate, @unchecked Sendable {
    typealias Response = Void

    let loop: any EventLoop
    /// Completed by the answer's head, or failed by an error before it.
    let head: EventLoopPromise<HTTPResponseHead>
    private var headCompleted = false
    private var source: AnswerBody.Parts.Source?
    /// Set while the reader holds as many parts as it may: the server's next part waits for it.
    private var demand: EventLoopPromise<Void>?
    /// The exchange, ended when the reader goes away.
    private var task: HTTPClient.Task<Void>?
    private var readerGone = false

    init(loop: any EventLoop) {
        self.loop = loop
        self.head = loop.makePromise(of: HTTPResponseHead.self)
    }

    /// The body's sequence, made once before the exchange starts.
    func makeBody() -> AnswerBody {
        // At most 4 parts (each up to one read from the connection, 64 KiB) wait for the reader.
        let made = AnswerBody.Parts.makeSequence(backPressureStrategy: .init(lowWatermark: 1, highWatermark: 4),
                                                 finishOnDeinit: true, delegate: self)
        source = made.source
        return AnswerBody(parts: made.sequence)
    }

    /// The exchange this delegate receives, so that a reader who goes away can end it.
    func started(_ task: HTTPClient.Task<Void>) {
        loop.execute {
            self.task = task
            if self.readerGone { task.cancel() }
        }
    }

    // MARK: async-http-client's side, on `loop`

    func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        headCompleted = true
        self.head.succeed(head)
        return loop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        switch source?.yield(buffer) {
        case .produceMore:
            return loop.makeSucceededVoidFuture()
        case .stopProducing:
            let more = loop.makePromise(of: Void.self)
            demand = more
            return more.futureResult
        case .dropped, nil:
            task.cancel()
            return loop.makeSucceededVoidFuture()
        }
    }

    func didReceiveError(task: HTTPClient.Task<Void>, _ error: any Error) {
        if !headCompleted {
            headCompleted = true
            head.fail(error)
        }
        source?.finish(error)
        source = nil
        demand?.succeed()
        demand = nil
    }

    func didFinishRequest(task: HTTPClient.Task<Void>) throws {
        source?.finish()
        source = nil
    }

    // MARK: the reader's side, from any thread

    func produceMore() {
        loop.execute {
            self.demand?.succeed()
            self.demand = nil
        }
    }

    func didTerminate() {
        loop.execute {
            self.readerGone = true
            self.source = nil
            self.task?.cancel()
            self.demand?.succeed()
            self.demand = nil
        }
    }
}
