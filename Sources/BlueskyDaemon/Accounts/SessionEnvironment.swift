import BlueskyHTTP
import BlueskyStore
import Foundation
import Logging
import Synchronization
import XRPC

/// What every account session shares: the store, the HTTP client, timing rules and a clock.
/// A class, so that each of the (possibly 100,000) sessions holds one reference to it.
final class SessionEnvironment: Sendable {
    let store: any AccountStorage
    /// The in-memory index of every session, so a session can re-index itself (a new handle).
    let registry = AccountRegistry()
    /// The client of proxied XRPC calls.
    let http: any HTTPFetching
    let sessions: LegacySessionClient
    /// OAuth: nonces, clock skew, the authorization servers' client, logins in progress.
    let oauth: OAuthEnvironment
    /// The refreshes in flight, which a stop waits for.
    let refreshes = RefreshTracker()
    /// Where account changes are published for subscribers (`events.subscribe`).
    let events: EventHub
    /// Timing rules a configuration reload may change while accounts are live.
    private let timing: Mutex<(refreshAhead: Duration, backoff: Backoff)>
    let upstreamTimeout: Duration
    let logger: Logger
    /// Wall-clock now; token lifetimes are wall-clock.
    let now: @Sendable () -> Date
    /// Moves the account's entry in the refresh schedule (nil: none until a new login).
    let reschedule: @Sendable (UUID, Date?) async -> Void
    /// Whether the refresh schedule is the shared store's: another host's change then needs
    /// no reschedule here (that host recorded the date), and a taken account is looked at
    /// before it is refreshed (the date may be older than its tokens).
    let scheduleIsShared: Bool

    init(store: any AccountStorage, http: any HTTPFetching, sessions: LegacySessionClient, oauth: OAuthEnvironment,
         refreshAhead: Duration,
         backoff: Backoff, upstreamTimeout: Duration, logger: Logger, now: @escaping @Sendable () -> Date,
         reschedule: @escaping @Sendable (UUID, Date?) async -> Void, scheduleIsShared: Bool = false,
         events: EventHub = EventHub()) {
        self.events = events
        self.store = store
        self.http = http
        self.sessions = sessions
        self.oauth = oauth
        self.timing = Mutex((refreshAhead, backoff))
        self.upstreamTimeout = upstreamTimeout
        self.logger = logger
        self.now = now
        self.reschedule = reschedule
        self.scheduleIsShared = scheduleIsShared
    }

    /// Runs a store call on the concurrency pool. Session code is actor code, and an actor
    /// drains its queue on whichever thread runs it, the event loop of a proxied call
    /// included: a call that waits on the disk or the database must be made from here.
    func storeCall<T: Sendable>(_ body: @escaping @Sendable (any AccountStorage) throws -> T) async throws -> T {
        let store = self.store
        return try await Task(executorPreference: globalConcurrentExecutor) { try body(store) }.value
    }

    var refreshAhead: Duration { timing.withLock { $0.refreshAhead } }
    var backoff: Backoff { timing.withLock { $0.backoff } }

    /// New timing rules (a reload): they apply from each account's next scheduling decision.
    func retime(refreshAhead: Duration, backoff: Backoff) {
        timing.withLock { $0 = (refreshAhead, backoff) }
    }
}

/// Exponential backoff with jitter for transient refresh failures.
struct Backoff: Sendable {
    var initial: Duration
    var maximum: Duration

    /// Trying the shared store again (due dates, takes, other hosts' changes): 0.5 s doubling
    /// to 30 s, as the connection pool itself reconnects.
    static let storeRetry = Backoff(initial: .milliseconds(500), maximum: .seconds(30))

    /// The longest wait a server's Retry-After is taken at its word for; beyond it, a date
    /// decades away would stop the account for good on one bad header.
    static let longestServerWait: TimeInterval = 7 * 24 * 3600

    /// Seconds to wait before attempt `attempt` (1-based). What the server asked for
    /// (Retry-After, RateLimit-Reset) is never shortened, not even to `maximum`.
    func delay(attempt: Int, serverAsked: TimeInterval?) -> TimeInterval {
        let base = initial.seconds * pow(2, Double(min(max(0, attempt - 1), 40)))
        let capped = min(maximum.seconds, base)
        let jittered = capped * Double.random(in: 0.8...1.0)
        return max(jittered, min(serverAsked ?? 0, Self.longestServerWait))
    }
}

extension Duration {
    /// This duration in (fractional) seconds.
    var seconds: TimeInterval {
        let (s, attoseconds) = components
        return TimeInterval(s) + TimeInterval(attoseconds) / 1e18
    }
}
