import Testing
@testable import RPCServer

/// The reply queue without a socket: a request that completes the next reply while the writer
/// waits idle writes it itself, and replies still leave in request order, one writer at a time.
@Suite("OrderedReplyQueue: the writer's turn taken by a request")
struct OrderedReplyQueueTests {
    static func line(_ text: String) -> OrderedReplyQueue.Reply { .line(Array(text.utf8)) }

    static func text(_ replies: [OrderedReplyQueue.Reply]) -> [String] {
        replies.map { reply in
            if case .line(let bytes) = reply { return String(decoding: bytes, as: UTF8.self) }
            return "(silent)"
        }
    }

    /// Parks a writer on `queue` and returns its task; `queue` has handed it nothing yet.
    static func parkedWriter(_ queue: OrderedReplyQueue) async -> Task<[String], Never> {
        let writer = Task {
            var written: [String] = []
            while let reply = await queue.nextReply() { written += text([reply]) }
            return written
        }
        // The writer parks on its first call: then a completion finds it waiting.
        while !queue.writerIsWaiting { await Task.yield() }
        return writer
    }

    @Test("the next reply, completed while the writer waits, goes to its request; a later one waits for its turn")
    func requestTakesTurn() async throws {
        let queue = OrderedReplyQueue(capacity: 8)
        let (a, b, c) = (await queue.takeTicket(), await queue.takeTicket(), await queue.takeTicket())
        let writer = await Self.parkedWriter(queue)
        // b is not due yet: nothing handed over, the writer keeps waiting.
        #expect(queue.completeAndTakeTurn(try #require(b), with: Self.line("b")).isEmpty)
        // a is due: a and b go to a's request, which holds the turn.
        #expect(Self.text(queue.completeAndTakeTurn(try #require(a), with: Self.line("a"))) == ["a", "b"])
        // c completes while a's request writes: it is not handed to the writer (two writers) nor to c.
        #expect(queue.completeAndTakeTurn(try #require(c), with: Self.line("c")).isEmpty)
        // a's request finishes its writes and is handed c; then the turn goes back.
        #expect(Self.text(queue.finishWriting()) == ["c"])
        #expect(queue.finishWriting().isEmpty)
        let d = try #require(await queue.takeTicket())
        queue.complete(d, with: Self.line("d"))
        queue.finishTakingTickets()
        #expect(await writer.value == ["d"], "the writer has its turn back and ends after the last reply")
    }

    @Test("input that ends while a request holds the turn ends the writer once the turn is back")
    func endWhileRequestWrites() async throws {
        let queue = OrderedReplyQueue(capacity: 8)
        let a = try #require(await queue.takeTicket())
        let writer = await Self.parkedWriter(queue)
        #expect(Self.text(queue.completeAndTakeTurn(a, with: Self.line("a"))) == ["a"])
        queue.finishTakingTickets()
        #expect(queue.finishWriting().isEmpty)
        #expect(await writer.value == [])
    }

    @Test("an abort while a request holds the turn ends the writer and hands nothing more")
    func abortWhileRequestWrites() async throws {
        let queue = OrderedReplyQueue(capacity: 8)
        let (a, b) = (try #require(await queue.takeTicket()), try #require(await queue.takeTicket()))
        let writer = await Self.parkedWriter(queue)
        #expect(Self.text(queue.completeAndTakeTurn(a, with: Self.line("a"))) == ["a"])
        queue.abort()
        #expect(queue.completeAndTakeTurn(b, with: Self.line("b")).isEmpty)
        #expect(queue.finishWriting().isEmpty)
        #expect(await writer.value == [])
    }

    @Test("replies a request takes free their tickets: a reader waiting at capacity goes on")
    func takenRepliesFreeCapacity() async throws {
        let queue = OrderedReplyQueue(capacity: 1)
        let a = try #require(await queue.takeTicket())
        let writer = await Self.parkedWriter(queue)
        let reader = Task { await queue.takeTicket() }
        #expect(Self.text(queue.completeAndTakeTurn(a, with: Self.line("a"))) == ["a"])
        #expect(await reader.value == 1)
        #expect(queue.finishWriting().isEmpty)
        queue.finishTakingTickets()
        queue.abort()
        _ = await writer.value
    }
}
