import AccountStoreCore
import BlueskyHTTP
import CoreMetrics
import Foundation
import Prometheus
import Synchronization

/// blueskyd's metrics, in Prometheus's naming: swift-metrics instruments made by a factory over
/// this daemon's own registry (never the process-wide bootstrap, so that daemons in one test
/// process keep theirs apart). No instrument carries an account: the label sets are fixed.
final class DaemonMetrics: Sendable {
    /// Where a proxied call came in.
    enum Front: String, CaseIterable, Sendable {
        case jsonRPC = "jsonrpc"
        case gateway
    }

    /// How a refresh ended, from the lifecycle's notes.
    enum RefreshOutcome: String, CaseIterable, Sendable {
        /// New tokens, saved.
        case rotated
        /// A transient failure: retried after a backoff.
        case transient
        /// The session ended: needs a new login.
        case definitive
        /// The server rotated, the store refused the save: held and saved again.
        case saveRefused = "save-refused"
    }

    let registry = PrometheusCollectorRegistry()
    private let factory: PrometheusMetricsFactory
    private let refreshes: [String: CoreMetrics.Counter]
    private let calls: [String: CoreMetrics.Counter]
    private let addedLatency: [Front: CoreMetrics.Timer]
    private let refusals: Mutex<[String: CoreMetrics.Counter]> = Mutex([:])
    private let denials: Mutex<[String: CoreMetrics.Counter]> = Mutex([:])
    private let refreshDuration: [AuthKind: CoreMetrics.Timer]
    private let backoffWaits: [AuthKind: CoreMetrics.Counter]
    private let backoffSeconds: CoreMetrics.Recorder
    private let leasesTaken: CoreMetrics.Counter
    private let leasesTakenOver: CoreMetrics.Counter
    /// Values read at each scrape that only grow, and what was exported of them so far.
    let exported = Mutex<[String: Int]>([:])
    /// Per-account gauges (`metrics_per_account`), by DID.
    let accountSeries = Mutex<[String: AccountSeries]>([:])

    /// Added latency buckets: 25 µs to 10 ms.
    static let latencyBuckets: [Duration] = [25, 50, 75, 100, 150, 200, 300, 500, 1_000, 2_500, 10_000].map { .microseconds($0) }

    /// Refresh exchanges: 10 ms to 60 s (a nonce retry doubles one; a slow server stretches it).
    static let refreshBuckets: [Duration] = [10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000]
        .map { .milliseconds($0) }
    /// Backoff waits: 1 s to 1 h (the default ceiling is 15 min).
    static let backoffBuckets: [Double] = [1, 5, 15, 30, 60, 120, 300, 600, 900, 1_800, 3_600]

    init() {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets["blueskyd_proxy_added_latency_seconds"] = Self.latencyBuckets
        factory.durationHistogramBuckets["blueskyd_refresh_duration_seconds"] = Self.refreshBuckets
        factory.valueHistogramBuckets["blueskyd_backoff_wait_seconds"] = Self.backoffBuckets
        self.factory = factory
        var refreshDuration: [AuthKind: CoreMetrics.Timer] = [:]
        var backoffWaits: [AuthKind: CoreMetrics.Counter] = [:]
        for kind in AuthKind.allCases {
            refreshDuration[kind] = CoreMetrics.Timer(label: "blueskyd_refresh_duration_seconds", dimensions: [("kind", kind.rawValue)],
                                                      factory: factory)
            backoffWaits[kind] = CoreMetrics.Counter(label: "blueskyd_backoff_waits_total", dimensions: [("kind", kind.rawValue)],
                                                     factory: factory)
        }
        self.refreshDuration = refreshDuration
        self.backoffWaits = backoffWaits
        backoffSeconds = CoreMetrics.Recorder(label: "blueskyd_backoff_wait_seconds", aggregate: true, factory: factory)
        leasesTaken = CoreMetrics.Counter(label: "blueskyd_leases_taken_total", factory: factory)
        leasesTakenOver = CoreMetrics.Counter(label: "blueskyd_leases_taken_over_total", factory: factory)
        var refreshes: [String: CoreMetrics.Counter] = [:]
        for kind in AuthKind.allCases {
            for outcome in RefreshOutcome.allCases {
                refreshes["\(kind.rawValue)/\(outcome.rawValue)"] = CoreMetrics.Counter(
                    label: "blueskyd_refreshes_total", dimensions: [("kind", kind.rawValue), ("outcome", outcome.rawValue)],
                    factory: factory)
            }
        }
        self.refreshes = refreshes
        var calls: [String: CoreMetrics.Counter] = [:]
        var addedLatency: [Front: CoreMetrics.Timer] = [:]
        for front in Front.allCases {
            for status in Self.statusClasses {
                calls["\(front.rawValue)/\(status)"] = CoreMetrics.Counter(
                    label: "blueskyd_proxied_calls_total", dimensions: [("front", front.rawValue), ("status", status)],
                    factory: factory)
            }
            addedLatency[front] = CoreMetrics.Timer(label: "blueskyd_proxy_added_latency_seconds",
                                                    dimensions: [("front", front.rawValue)], factory: factory)
        }
        self.calls = calls
        self.addedLatency = addedLatency
    }

    /// A call's status as counted: the PDS's status class, or `error` when blueskyd could not
    /// make the call (no answer from the PDS).
    static let statusClasses = ["1xx", "2xx", "3xx", "4xx", "5xx", "error"]

    static func statusClass(_ status: Int?) -> String {
        guard let status, (100...599).contains(status) else { return "error" }
        return "\(status / 100)xx"
    }

    /// Counts the refresh outcomes among the lifecycle's notes (the one place every change of
    /// an account passes).
    func noted(_ note: AccountLifecycle.Note, kind: AuthKind) {
        let outcome: RefreshOutcome
        switch note {
        case .refreshed: outcome = .rotated
        case .retrying(_, let delay):
            outcome = .transient
            backedOff(kind: kind, seconds: delay)
        case .needsLogin: outcome = .definitive
        case .saveRefused(_, let delay):
            outcome = .saveRefused
            backedOff(kind: kind, seconds: delay)
        case .adoptedNewerTokens, .savedOverByAnotherHost, .movedAway, .recordAltered: return
        }
        refreshes["\(kind.rawValue)/\(outcome.rawValue)"]?.increment()
    }

    /// An account entered a backoff of `seconds`.
    private func backedOff(kind: AuthKind, seconds: TimeInterval) {
        backoffWaits[kind]?.increment()
        backoffSeconds.record(seconds)
    }

    /// One refresh's exchange with its server (from the claim to the answer, a nonce retry
    /// included), whatever it brought.
    func refreshExchange(kind: AuthKind, took duration: Duration) {
        refreshDuration[kind]?.recordNanoseconds(max(0, duration.nanoseconds))
    }

    /// A refresh lease this host took in the shared store; `takenOver` when an earlier
    /// refresh's outcome was never recorded (a host died holding it, or a crash).
    func leaseTaken(takenOver: Bool) {
        leasesTaken.increment()
        if takenOver { leasesTakenOver.increment() }
    }

    /// A call a client's policy refused (`client`: its `[[client]]` name, or `exec`).
    func policyDenied(client: String) {
        let counter = denials.withLock { counters in
            if let counter = counters[client] { return counter }
            let made = CoreMetrics.Counter(label: "blueskyd_policy_denials_total", dimensions: [("client", client)], factory: factory)
            counters[client] = made
            return made
        }
        counter.increment()
    }

    /// One proxied call: its PDS status (nil: blueskyd's own error), how long it took in all,
    /// and how much of that was spent waiting on the PDS; the rest is blueskyd's added latency.
    /// `upstream` nil: a streamed call, whose length says nothing of blueskyd (counted only).
    func proxiedCall(front: Front, status: Int?, total: Duration, upstream: Duration?) {
        calls["\(front.rawValue)/\(Self.statusClass(status))"]?.increment()
        guard status != nil, let upstream else { return }
        addedLatency[front]?.recordNanoseconds(max(0, (total - upstream).nanoseconds))
    }

    /// A request the gateway refused before reading it.
    func gatewayRefused(reason: String) {
        let counter = refusals.withLock { counters in
            if let counter = counters[reason] { return counter }
            let made = CoreMetrics.Counter(label: "blueskyd_gateway_refusals_total", dimensions: [("reason", reason)],
                                           factory: factory)
            counters[reason] = made
            return made
        }
        counter.increment()
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}

/// The time a proxied call spent waiting on the PDS, summed over its exchanges (a refresh and
/// a retry make several), so that the front that measures the whole call can tell blueskyd's
/// own time from the server's.
final class UpstreamTime: Sendable {
    private let total = Mutex(Duration.zero)

    var spent: Duration { total.withLock { $0 } }

    func add(_ duration: Duration) {
        total.withLock { $0 += duration }
    }
}

/// A client whose exchanges are timed into one call's `UpstreamTime`.
struct TimedHTTP: HTTPFetching {
    let base: any HTTPFetching
    let upstream: UpstreamTime

    func send(_ request: OutboundRequest, timeout: Duration) async throws(HTTPError) -> InboundResponse {
        let start = ContinuousClock.now
        defer { upstream.add(ContinuousClock.now - start) }
        return try await base.send(request, timeout: timeout)
    }
}

extension XRPCProxy {
    /// Counts one proxied call from `front` that started at `start`: its status class, and the
    /// latency blueskyd added (all but `upstream`, its exchanges with the PDS).
    func count(_ front: DaemonMetrics.Front, status: Int?, since start: ContinuousClock.Instant, upstream: UpstreamTime?) {
        environment.metrics?.proxiedCall(front: front, status: status, total: ContinuousClock.now - start,
                                         upstream: upstream?.spent)
    }

    /// Runs one proxied call from `front` and counts it: `call` gets the collector of its time
    /// with the PDS (nil when metrics are off: no cost), `status` reads the answer's status.
    func counted<Answer>(_ front: DaemonMetrics.Front, status: (Answer) -> Int?,
                         _ call: (UpstreamTime?) async throws(DaemonError) -> Answer) async throws(DaemonError) -> Answer {
        let upstream = environment.metrics == nil ? nil : UpstreamTime()
        let start = ContinuousClock.now
        do {
            let answer = try await call(upstream)
            count(front, status: status(answer), since: start, upstream: upstream)
            return answer
        } catch {
            count(front, status: nil, since: start, upstream: upstream)
            throw error
        }
    }
}
