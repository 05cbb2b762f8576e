import Foundation

/// Keeps a connection's replies in request order while their requests run concurrently.
///
/// The reader takes a ticket per request line (waiting while `capacity` tickets are
/// outstanding: that is the back-pressure that stops reading from a client that does not read
/// its replies); each request completes its ticket whenever it finishes; the writer receives
/// completed tickets strictly in ticket order. A request that completes the next reply while
/// the writer waits idle writes it itself instead (`completeAndTakeTurn`): waking the writer
/// would cost the call one more pass through the event loop. One writes at a time, in order.
final class OrderedReplyQueue: @unchecked Sendable {
    /// What a request line produces: a line to send, or nothing (notifications).
    enum Reply: Sendable {
        case line([UInt8])
        case silent
    }

    private let lock = NSLock()
    private let capacity: Int
    private var issued = 0
    private var delivered = 0
    private var completed: [Int: Reply] = [:]
    private var noMoreTickets = false
    /// A request holds the writer's turn (`completeAndTakeTurn` until `finishWriting`).
    private var requestWriting = false
    private var aborted = false
    private var waitingReader: CheckedContinuation<Int?, Never>?
    private var waitingWriter: CheckedContinuation<Reply?, Never>?

    init(capacity: Int) {
        precondition(capacity > 0)
        self.capacity = capacity
    }

    /// The next ticket, once fewer than `capacity` are outstanding; nil after `abort()`.
    func takeTicket() async -> Int? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready: Int?? = lock.withLock {
                    if aborted { return .some(nil) }
                    guard issued - delivered < capacity else {
                        waitingReader = continuation
                        return .none
                    }
                    issued += 1
                    return .some(issued - 1)
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            abort()
        }
    }

    /// Records the reply for `ticket` (ignored after `abort()`).
    func complete(_ ticket: Int, with reply: Reply) {
        let wakeups: Wakeups = lock.withLock {
            guard !aborted else { return Wakeups() }
            completed[ticket] = reply
            return deliverIfPossible()
        }
        wakeups.resume()
    }

    /// The next reply in ticket order; nil once every ticket was delivered after
    /// `finishTakingTickets()`, or after `abort()`.
    func nextReply() async -> Reply? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let wakeups: Wakeups = lock.withLock {
                    waitingWriter = continuation
                    return deliverIfPossible()
                }
                wakeups.resume()
            }
        } onCancel: {
            abort()
        }
    }

    /// Records the reply for `ticket`. When the writer waits idle and the replies due next are
    /// ready, they are handed to the caller to write, in order, instead of to the writer: the
    /// caller then holds the writer's turn until it calls `finishWriting()`. Otherwise as
    /// `complete(_:with:)`, and nothing is handed over.
    func completeAndTakeTurn(_ ticket: Int, with reply: Reply) -> [Reply] {
        let (replies, wakeups): ([Reply], Wakeups) = lock.withLock {
            guard !aborted else { return ([], Wakeups()) }
            completed[ticket] = reply
            guard waitingWriter != nil, !requestWriting, completed[delivered] != nil else { return ([], deliverIfPossible()) }
            requestWriting = true
            return (takeDue(), deliverIfPossible())
        }
        wakeups.resume()
        return replies
    }

    /// The caller wrote what it was handed: the replies due since, to write too (it keeps the
    /// turn), or none, and the turn goes back to the writer (woken if input ended meanwhile).
    func finishWriting() -> [Reply] {
        let (replies, wakeups): ([Reply], Wakeups) = lock.withLock {
            if !aborted, completed[delivered] != nil { return (takeDue(), deliverIfPossible()) }
            requestWriting = false
            return ([], deliverIfPossible())
        }
        wakeups.resume()
        return replies
    }

    /// The writer waits for a reply (tests).
    var writerIsWaiting: Bool { lock.withLock { waitingWriter != nil } }

    /// Must hold the lock: the completed replies due next, in order, counted as delivered.
    private func takeDue() -> [Reply] {
        var due: [Reply] = []
        while let reply = completed.removeValue(forKey: delivered) {
            delivered += 1
            due.append(reply)
        }
        return due
    }

    /// The reader will take no more tickets (end of input).
    func finishTakingTickets() {
        let wakeups: Wakeups = lock.withLock {
            noMoreTickets = true
            return deliverIfPossible()
        }
        wakeups.resume()
    }

    /// Gives up: wakes everyone waiting with nil and drops later replies (the connection is gone).
    func abort() {
        let wakeups: Wakeups = lock.withLock {
            aborted = true
            completed.removeAll()
            defer { (waitingReader, waitingWriter) = (nil, nil) }
            return Wakeups(reader: waitingReader.map { ($0, nil) }, writer: waitingWriter.map { ($0, nil) })
        }
        wakeups.resume()
    }

    /// Continuations to resume once the lock is released.
    private struct Wakeups {
        var reader: (CheckedContinuation<Int?, Never>, Int?)?
        var writer: (CheckedContinuation<Reply?, Never>, Reply?)?

        func resume() {
            if let (continuation, ticket) = reader { continuation.resume(returning: ticket) }
            if let (continuation, reply) = writer { continuation.resume(returning: reply) }
        }
    }

    /// Must hold the lock.
    private func deliverIfPossible() -> Wakeups {
        var wakeups = Wakeups()
        if let writer = waitingWriter, !requestWriting || aborted {
            if aborted {
                wakeups.writer = (writer, nil)
                waitingWriter = nil
            } else if let reply = completed.removeValue(forKey: delivered) {
                delivered += 1
                wakeups.writer = (writer, reply)
                waitingWriter = nil
            } else if noMoreTickets, delivered == issued {
                wakeups.writer = (writer, nil)
                waitingWriter = nil
            }
        }
        if let reader = waitingReader, issued - delivered < capacity {
            issued += 1
            wakeups.reader = (reader, issued - 1)
            waitingReader = nil
        }
        return wakeups
    }
}
