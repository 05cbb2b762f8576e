import Foundation

/// Keeps a connection's replies in request order while their requests run concurrently.
///
/// The reader takes a ticket per request line (waiting while `capacity` tickets are
/// outstanding: that is the back-pressure that stops reading from a client that does not read
/// its replies); each request completes its ticket whenever it finishes; the writer receives
/// completed tickets strictly in ticket order.
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
        if let writer = waitingWriter {
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
