import DequeModule
import Foundation
import JSONRPC
import Synchronization

/// Every account and daemon event, numbered, kept in a ring for subscribers that resume with
/// `since`, and handed to each subscriber's own bounded backlog.
///
/// Publishing never waits for a subscriber: a slow one loses its oldest events (and is told
/// with `events.gap`), never anyone else's or the daemon's time.
final class EventHub: Sendable {
    /// Events kept for `since` (the protocol promises at least 10,000).
    let historyLimit: Int
    /// Events a subscriber may have waiting before its oldest are dropped.
    let backlogLimit: Int

    private struct State {
        var history = Deque<PublishedEvent>()
        var latest: UInt64
        var subscribers: [ObjectIdentifier: EventSubscription] = [:]
        var closed = false
    }

    private let state: Mutex<State>
    private let now: @Sendable () -> Date

    /// - Parameter firstSeq: one before the first event's number. By default microseconds
    ///   since 1970 at start, so that numbers keep growing across restarts and a `since` from
    ///   an earlier run is always older than this run's history (then answered with a gap).
    init(historyLimit: Int = 16_384, backlogLimit: Int = 1_024, firstSeq: UInt64? = nil,
         now: @escaping @Sendable () -> Date = { Date() }) {
        self.historyLimit = max(1, historyLimit)
        self.backlogLimit = max(1, backlogLimit)
        self.now = now
        let start = firstSeq ?? UInt64(max(0, now().timeIntervalSince1970 * 1_000_000))
        state = Mutex(State(latest: start))
    }

    /// The number of the latest event.
    var latestSeq: UInt64 { state.withLock { $0.latest } }

    var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// The most events any one subscriber has waiting (at most `backlogLimit` once replays are read).
    var largestBacklog: Int {
        state.withLock { $0.subscribers.values.map(\.backlogCount).max() ?? 0 }
    }

    /// Publishes one event: `{"seq","kind","at","account"?, ...fields}`. Never carries a token:
    /// callers pass account views and plain facts.
    func publish(_ kind: EventKind, account: PublishedEvent.AccountKeys? = nil, view: JSONValue? = nil,
                 fields: [String: JSONValue] = [:]) {
        var params = fields
        params["kind"] = .string(kind.rawValue)
        params["at"] = AccountView.timestamp(now())
        if let view { params["account"] = view }
        // Numbered, encoded and handed out under one lock: every subscriber sees the events
        // in number order (encoding is a few microseconds; publishers are few).
        let wakeups = state.withLock { state -> [EventSubscription] in
            guard !state.closed else { return [] }
            state.latest += 1
            params["seq"] = .number(Double(state.latest))
            let line = RPCOutbound.line(for: RPCRequest(id: nil, method: "event", params: .object(params)))
            let event = PublishedEvent(seq: state.latest, kind: kind, account: account, line: line)
            state.history.append(event)
            if state.history.count > historyLimit { state.history.removeFirst() }
            return state.subscribers.values.filter { $0.offer(event) }
        }
        wakeups.forEach { $0.wake() }
    }

    /// A new subscription, and the latest number at the time (the reply's `seq`). With
    /// `since`, the events after it that the history still holds come first; a `since` the
    /// history no longer covers (or from another run) starts with `events.gap`.
    func subscribe(_ filter: EventFilter, since: UInt64?) -> (EventSubscription, latest: UInt64)? {
        state.withLock { state in
            guard !state.closed else { return nil }
            let subscription = EventSubscription(filter: filter, backlogLimit: backlogLimit, hub: self)
            if let since {
                let oldest = state.history.first?.seq ?? state.latest + 1
                if since > state.latest || since + 1 < oldest {
                    subscription.startWithGap(since: since, oldest: oldest, latest: state.latest)
                } else {
                    // Sequence numbers in the history are consecutive: skip to `since` instead of
                    // scanning 16,384 events while every publisher waits on the lock.
                    subscription.replay(Array(state.history.dropFirst(Int(since + 1 - oldest))))
                }
            }
            state.subscribers[ObjectIdentifier(subscription)] = subscription
            return (subscription, state.latest)
        }
    }

    func remove(_ subscription: EventSubscription) {
        _ = state.withLock { $0.subscribers.removeValue(forKey: ObjectIdentifier(subscription)) }
    }

    /// The daemon is stopping: no more events; each subscription ends once its backlog (the
    /// `daemon.stopping` event included) is written.
    func close() {
        let subscribers = state.withLock { state -> [EventSubscription] in
            state.closed = true
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        subscribers.forEach { $0.finish() }
    }
}
