import AccountStoreCore
import BlueskyHTTP
import Foundation
import Logging
import Synchronization
import WebBasics
import XRPC

/// What every account session shares: the store, the HTTP clients, timing rules, a clock, and
/// where due dates and events go. A class, so that each of the (possibly 100,000) sessions holds
/// one reference to it.
final class SessionEnvironment: Sendable {
    let store: any AccountStore
    /// The in-memory index of every session, so a session can re-index itself (a new handle).
    let registry = AccountRegistry()
    /// The client of proxied XRPC calls.
    let http: any HTTPFetching
    let sessions: LegacySessionClient
    /// OAuth: nonces, clock skew, the authorization servers' client, logins in progress.
    let oauth: OAuthEnvironment
    /// The refreshes in flight, which a stop waits for.
    let refreshes = RefreshTracker()
    /// Tracked work off the callers' paths, ended before the store closes.
    let background = BackgroundWork()
    let nonceSaver: NonceSaver
    /// Where account changes are published for subscribers (`events.subscribe`).
    let events: EventHub
    /// The accounts holding rotated tokens the store has not saved yet: a stop tries them once
    /// more, and names those it could not keep.
    let unsaved = Mutex<Set<UUID>>([])
    /// When each account was last said to lack a scope (`account.needsScope`), so that a
    /// program repeating a refused call does not flood the subscribers. Kept here, not in the
    /// sessions: it costs nothing until a scope is missing.
    let scopeNotices = Mutex<[ScopeNotice: Date]>([:])
    /// Timing rules a configuration reload may change while accounts are live.
    private let timing: Mutex<AccountLifecycle.Rules>
    let upstreamTimeout: Duration
    let logger: Logger
    /// Wall-clock now; token lifetimes are wall-clock.
    let now: @Sendable () -> Date
    /// Where an account's due date goes (the scheduler's inbox): never awaited, so that a
    /// session's state and the date it tells arrive in the same order.
    let schedule: @Sendable (UUID, AccountLifecycle.Due, _ server: String) -> Void
    /// Where refreshes and calls are counted (nil in tests that do not look).
    let metrics: DaemonMetrics?
    /// What calls need of the accounts in use, published by their sessions.
    let liveTargets = LiveCallTargets()

    init(store: any AccountStore, http: any HTTPFetching, sessions: LegacySessionClient, oauth: OAuthEnvironment,
         rules: AccountLifecycle.Rules, upstreamTimeout: Duration, logger: Logger, now: @escaping @Sendable () -> Date,
         schedule: @escaping @Sendable (UUID, AccountLifecycle.Due, String) -> Void, events: EventHub = EventHub(),
         metrics: DaemonMetrics? = nil) {
        self.metrics = metrics
        self.events = events
        self.store = store
        self.http = http
        self.sessions = sessions
        self.oauth = oauth
        self.timing = Mutex(rules)
        self.upstreamTimeout = upstreamTimeout
        self.logger = logger
        self.now = now
        self.schedule = schedule
        self.nonceSaver = NonceSaver(store: store, work: background)
    }

    var rules: AccountLifecycle.Rules { timing.withLock { $0 } }

    /// What a refresh request leaves of its lease at the least, once answered: room for the
    /// save, and for clocks that run a little apart.
    let leaseMargin: Duration = .seconds(2)

    /// New timing rules (a reload): they apply from each account's next scheduling decision.
    func retime(_ rules: AccountLifecycle.Rules) {
        timing.withLock { $0 = rules }
    }
}
