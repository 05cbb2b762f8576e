import DequeModule
import Foundation
import JSONRPC
import RPCServer

/// One subscriber's events on their way to its connection: a bounded backlog that loses its
/// oldest events (and says so with one `events.gap`) when the client does not keep up.
final class EventSubscription: RPCNotificationStream, @unchecked Sendable {
    let filter: EventFilter
    private let backlogLimit: Int
    private let hub: EventHub
    private let lock = NSLock()
    private var backlog = Deque<PublishedEvent>()
    /// Replayed history (`since`) waiting in the backlog, not counted against its limit.
    private var replayAllowance = 0
    /// Events dropped since the client last read: first and last number, and how many.
    private var dropped: (first: UInt64, last: UInt64, count: Int)?
    /// A gap to announce first: the `since` the history no longer covered.
    private var pendingHistoryGap: [String: JSONValue]?
    private var cancelled = false
    /// The daemon stops: the backlog is delivered, then the stream ends.
    private var finishing = false
    private var waiter: CheckedContinuation<[[UInt8]]?, Never>?

    init(filter: EventFilter, backlogLimit: Int, hub: EventHub) {
        self.filter = filter
        self.backlogLimit = backlogLimit
        self.hub = hub
    }

    var backlogCount: Int { lock.withLock { backlog.count } }

    /// A connection waits in `nextLines()` for the next event.
    var isWaiting: Bool { lock.withLock { waiter != nil } }

    // MARK: The hub's side (under the hub's lock)

    func replay(_ events: [PublishedEvent]) {
        lock.withLock {
            for event in events where filter.matches(event) { backlog.append(event) }
            replayAllowance = backlog.count
        }
    }

    func startWithGap(since: UInt64, oldest: UInt64, latest: UInt64) {
        lock.withLock {
            pendingHistoryGap = [
                "reason": "history", "since": .number(Double(since)),
                "oldestSeq": .number(Double(oldest)), "seq": .number(Double(latest)),
            ]
        }
    }

    /// Takes `event` when the filter wants it; true when the connection should be woken.
    func offer(_ event: PublishedEvent) -> Bool {
        guard filter.matches(event) else { return false }
        return lock.withLock {
            guard !cancelled, !finishing else { return false }
            backlog.append(event)
            while backlog.count > backlogLimit + replayAllowance {
                let lost = backlog.removeFirst()
                if replayAllowance > 0 { replayAllowance -= 1 }
                dropped = (dropped?.first ?? lost.seq, lost.seq, (dropped?.count ?? 0) + 1)
            }
            return waiter != nil
        }
    }

    /// Hands what is waiting to a waiting connection.
    func wake() {
        let (waiting, lines) = lock.withLock { () -> (CheckedContinuation<[[UInt8]]?, Never>?, [[UInt8]]?) in
            guard let waiter, let lines = takeLines() else { return (nil, nil) }
            self.waiter = nil
            return (waiter, lines)
        }
        waiting?.resume(returning: lines)
    }

    func finish() {
        let waiting = lock.withLock { () -> CheckedContinuation<[[UInt8]]?, Never>? in
            finishing = true
            guard backlog.isEmpty, dropped == nil, pendingHistoryGap == nil else { return nil }
            defer { waiter = nil }
            return waiter
        }
        waiting?.resume(returning: nil)
    }

    // MARK: The connection's side

    func nextLines() async -> [[UInt8]]? {
        await withCheckedContinuation { continuation in
            let ready: [[UInt8]]?? = lock.withLock {
                if cancelled { return .some(nil) }
                if let lines = takeLines() { return .some(lines) }
                if finishing { return .some(nil) }
                waiter = continuation
                return .none
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    func cancel() {
        let waiting = lock.withLock { () -> CheckedContinuation<[[UInt8]]?, Never>? in
            cancelled = true
            backlog.removeAll()
            defer { waiter = nil }
            return waiter
        }
        waiting?.resume(returning: nil)
        hub.remove(self)
    }

    /// Must hold the lock: the gap notice (if any) and every waiting event; nil when none.
    private func takeLines() -> [[UInt8]]? {
        var lines: [[UInt8]] = []
        if let gap = pendingHistoryGap {
            lines.append(Self.gapLine(gap))
            pendingHistoryGap = nil
            hub.noteGap(missed: 0)
        }
        if let dropped {
            hub.noteGap(missed: dropped.count)
            lines.append(Self.gapLine([
                "reason": "backlog", "missed": .number(Double(dropped.count)),
                "firstMissedSeq": .number(Double(dropped.first)), "lastMissedSeq": .number(Double(dropped.last)),
            ]))
            self.dropped = nil
        }
        guard !lines.isEmpty || !backlog.isEmpty else { return nil }
        lines.reserveCapacity(lines.count + backlog.count)
        for event in backlog { lines.append(event.line) }
        backlog.removeAll(keepingCapacity: backlog.count <= 64)
        replayAllowance = 0
        return lines
    }

    private static func gapLine(_ params: [String: JSONValue]) -> [UInt8] {
        RPCOutbound.line(for: RPCRequest(id: nil, method: "events.gap", params: .object(params)))
    }
}
