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

    /// `events.gap` notices sent, and the events they said were missed (for metrics).
    private let gaps = Atomic(0)
    private let missed = Atomic(0)
    var gapsSent: Int { gaps.load(ordering: .relaxed) }
    var eventsMissed: Int { missed.load(ordering: .relaxed) }

    /// A subscriber is told of a gap of `count` events (0: a history gap of unknown size).
    func noteGap(missed count: Int) {
        gaps.add(1, ordering: .relaxed)
        missed.add(count, ordering: .relaxed)
    }

    /// The most events any one subscriber has waiting (at most `backlogLimit` once replays are read).
    var largestBacklog: Int {
        state.withLock { $0.subscribers.values.map(\.backlogCount).max() ?? 0 }
    }

    /// Publishes one event: `{"seq","kind","at","account"?, ...fields}`. Never carries a token:
    /// callers pass account views and plain facts.
    func publish(_ kind: EventKind, account: PublishedEvent.AccountKeys? = nil, view: JSONValue? = nil,
                 fields: [String: JSONValue] = [:]) {
        let params = Self.params(kind, view: view, fields: fields, at: now())
        let wakeups = state.withLock { state -> [EventSubscription] in
            guard !state.closed else { return [] }
            return append(kind, account: account, params: params, to: &state)
        }
        wakeups.forEach { $0.wake() }
    }

    private static func params(_ kind: EventKind, view: JSONValue?, fields: [String: JSONValue], at: Date) -> [String: JSONValue] {
        var params = fields
        params["kind"] = .string(kind.rawValue)
        params["at"] = AccountView.timestamp(at)
        if let view { params["account"] = view }
        return params
    }

    /// Numbers, encodes and hands out one event, under the lock: every subscriber sees the
    /// events in number order (encoding is a few microseconds; publishers are few). Returns the
    /// subscriptions to wake.
    private func append(_ kind: EventKind, account: PublishedEvent.AccountKeys?, params: [String: JSONValue],
                        to state: inout State) -> [EventSubscription] {
        var params = params
        state.latest += 1
        params["seq"] = .number(Double(state.latest))
        let line = RPCOutbound.line(for: RPCRequest(id: nil, method: "event", params: .object(params)))
        let event = PublishedEvent(seq: state.latest, kind: kind, account: account, line: line)
        state.history.append(event)
        if state.history.count > historyLimit { state.history.removeFirst() }
        return state.subscribers.values.filter { $0.offer(event) }
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

    /// The daemon is stopping: `last` (`daemon.stopping`) is the final event, published and
    /// followed by the close under one lock, so that no event published meanwhile from another
    /// thread (a profile fetch ending) comes after it. Each subscription ends once its backlog
    /// is written.
    func close(last kind: EventKind? = nil) {
        let params = kind.map { Self.params($0, view: nil, fields: [:], at: now()) }
        let (wakeups, subscribers) = state.withLock { state -> ([EventSubscription], [EventSubscription]) in
            guard !state.closed else { return ([], []) }
            let woken = kind.map { append($0, account: nil, params: params ?? [:], to: &state) } ?? []
            state.closed = true
            defer { state.subscribers = [:] }
            return (woken, Array(state.subscribers.values))
        }
        wakeups.forEach { $0.wake() }
        subscribers.forEach { $0.finish() }
    }
}
