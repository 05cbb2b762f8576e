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
/// loop, hands its head and body parts on, and ends the upload's writes with the exchange.
///
/// Its state is touched on `loop` only: async-http-client calls a delegate on the task's event
/// loop, which `OutboundHTTP.stream` makes the connection's, and the body's reader side
/// (`produceMore`, `didTerminate`, called from any thread) and the upload's writer hop there.
final class StreamedAnswerDelegate: HTTPClientResponseDelegate, NIOAsyncSequenceProducerDelegate, @unchecked Sendable {
    typealias Response = Void

    let loop: any EventLoop
    /// Completed by the answer's head, or failed by the exchange's end before it.
    let head: EventLoopPromise<HTTPResponseHead>
    private var headCompleted = false
    private var source: AnswerBody.Parts.Source?
    /// Set while the reader holds as many parts as it may: the server's next part waits for it.
    private var demand: EventLoopPromise<Void>?
    /// The exchange, ended when the reader goes away.
    private var task: HTTPClient.Task<Void>?
    private var readerGone = false
    /// The exchange is over (answered, failed, cancelled): no upload write will be taken.
    private var ended = false
    /// The upload's write under way. async-http-client keeps a write made while the connection
    /// is not writable until it is, and drops it unanswered when the exchange ends meanwhile
    /// (a stalled server cut off, an early answer): it is failed here then.
    private var pendingWrite: EventLoopPromise<Void>?

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

    /// The exchange this delegate receives, so that a reader who goes away can end it. Its end
    /// ends everything here: a task that fails without calling its delegate (a client shutting
    /// down refuses new requests so) still fails the head.
    func started(_ task: HTTPClient.Task<Void>) {
        loop.execute {
            self.task = task
            if self.readerGone { task.cancel() }
        }
        task.futureResult.whenComplete { result in
            self.loop.execute {
                if case .failure(let error) = result { self.end(error) } else { self.end(nil) }
            }
        }
    }

    /// The exchange was never started (its request could not be made): its head fails.
    func abandon(_ error: any Error) {
        loop.execute { self.end(error) }
    }

    /// Writes one chunk of the upload with `write`, on the loop; the future completes once the
    /// connection has taken it, and fails when the exchange is over first.
    func write(_ chunk: ByteBuffer, with writer: HTTPClient.Body.StreamWriter) -> EventLoopFuture<Void> {
        let written = loop.makePromise(of: Void.self)
        loop.execute {
            guard !self.ended else { return written.fail(ExchangeEnded()) }
            self.pendingWrite = written
            writer.write(.byteBuffer(chunk)).whenComplete { result in
                if self.pendingWrite?.futureResult === written.futureResult { self.pendingWrite = nil }
                written.completeWith(result)
            }
        }
        return written.futureResult
    }

    /// The exchange is over, with `error` or answered whole.
    private func end(_ error: (any Error)?) {
        ended = true
        if !headCompleted {
            headCompleted = true
            head.fail(error ?? ExchangeEnded())
        }
        if let error { source?.finish(error) } else { source?.finish() }
        source = nil
        demand?.succeed()
        demand = nil
        pendingWrite?.fail(error ?? ExchangeEnded())
        pendingWrite = nil
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
        // A request whose head cannot be built fails on the caller's thread.
        if loop.inEventLoop { end(error) } else { loop.execute { self.end(error) } }
    }

    func didFinishRequest(task: HTTPClient.Task<Void>) throws {
        end(nil)
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

/// The exchange ended before an upload's write was taken, or without an answer's head.
struct ExchangeEnded: Error, CustomStringConvertible {
    var description: String { "the exchange ended" }
}
