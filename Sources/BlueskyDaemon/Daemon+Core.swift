import ATIdentity
import AccountStoreCore
import ATOAuth
import BlueskyHTTP
import Crypto
import Foundation
import Logging
import XRPC

/// What a start builds before it listens: the store opened with its key, the HTTP clients, the
/// identity resolver, the schedule and every account loaded. The daemon serves it; `store import
/// --check` uses it to try each restored session through the same code, then closes it as a stop
/// does.
struct DaemonCore: Sendable {
    let store: any AccountStore
    let key: SymmetricKey
    /// Logins, refreshes and identity lookups.
    let http: OutboundHTTP
    /// Proxied calls, the hot path: the lean keep-alive client on the caller's event loop.
    let callHTTP: KeepAliveHTTPClient
    let scheduler: RefreshScheduler
    let sharedSchedule: (any SharedRefreshSchedule)?
    let sharedDates: SharedDueWriter?
    let environment: SessionEnvironment
    let accounts: AccountManager
    let metrics: DaemonMetrics?
    /// Changes other hosts made, heard from before the accounts loaded.
    let storeChanges: StoreChangeInbox

    /// The end of a run, before the clients and the store close: the refreshes in flight end
    /// (whoever started them: the scheduler's, or a call's meeting an expired token), then the
    /// background work; rotated tokens the store refused are tried once more and any that stay
    /// unsaved are named at error (they are lost with this stop); the last due dates go to the
    /// shared schedule. Then the clients and the store close.
    func close(logger: Logger) async {
        if environment.refreshes.running > 0 {
            logger.info("waiting for refreshes in flight", metadata: ["count": "\(environment.refreshes.running)"])
        }
        await environment.refreshes.waitUntilIdle()
        await environment.background.stop()
        await accounts.saveBeforeStop()
        if let sharedSchedule, let sharedDates {
            // The dates noted since the scheduler's loop ended (refreshes that finished during
            // the stop, the last saves) go out with the rest.
            await scheduler.takeInNotedDates()
            await sharedDates.flush(sharedSchedule, logger: logger)
        }
        await callHTTP.shutdown()
        try? await http.shutdown()
        await store.close()
    }
}

/// The clients a start makes from the configuration (its CA file, nameservers, PLC URL), made
/// before anything is written by a command that needs them after (`store import --check`), so
/// that a configuration they cannot use is refused first.
struct OutboundClients: Sendable {
    let http: OutboundHTTP
    let callHTTP: KeepAliveHTTPClient
    let dns: DNSTXTResolver
    let plcURL: URL

    func shutdown() async {
        await callHTTP.shutdown()
        try? await http.shutdown()
    }
}

extension Daemon {
    func outboundClients() async throws(DaemonStartupError) -> OutboundClients {
        guard let plcURL = URL(string: configuration.plcURL), plcURL.host != nil,
              ["https", "http"].contains(plcURL.scheme?.lowercased() ?? "") else {
            throw DaemonStartupError("plc_url is not an https URL: \(configuration.plcURL)", exitCode: .configuration)
        }
        let policy = HTTPPolicy(allowInsecureLoopback: configuration.allowInsecureLoopback)
        let dns = try startup(DNSTXTResolver(nameservers: configuration.nameservers))
        let http = try startup(OutboundHTTP(.init(policy: policy, extraCAFile: configuration.extraCAFile)))
        do throws(DaemonStartupError) {
            let callHTTP = try startup(KeepAliveHTTPClient(.init(policy: policy, extraCAFile: configuration.extraCAFile)))
            return OutboundClients(http: http, callHTTP: callHTTP, dns: dns, plcURL: plcURL)
        } catch {
            try? await http.shutdown()
            throw error
        }
    }

    /// Opens the store (as a host of it), makes the clients and loads every account. The
    /// caller holds the state directory's instance lock.
    func startCore(stateDirectory: StateDirectory) async throws(DaemonStartupError) -> DaemonCore {
        let (store, key, _) = try await openCheckedStore(stateDirectory: stateDirectory, asHost: true)
        let clients: OutboundClients
        do throws(DaemonStartupError) {
            clients = try await outboundClients()
        } catch {
            await store.close()
            throw error
        }
        let (http, callHTTP, dns, plcURL) = (clients.http, clients.callHTTP, clients.dns, clients.plcURL)
        func fail(_ error: DaemonStartupError) async -> DaemonStartupError {
            await clients.shutdown()
            await store.close()
            return error
        }
        let identity = IdentityResolver(http: http, dns: dns, plcURL: plcURL, requestTimeout: configuration.upstreamTimeout,
                                        logger: logger)
        let sharedSchedule = store as? any SharedRefreshSchedule
        let sharedDates = sharedSchedule.map { _ in SharedDueWriter() }
        let scheduler = RefreshScheduler(limits: configuration.refreshLimits, now: { Date() }, shared: sharedDates)
        let oauthClient: OAuthClientIdentity
        do {
            oauthClient = try await OAuthClientIdentity.load(settings: configuration.oauthClient, store: store, now: Date(),
                                                             logger: logger)
        } catch {
            throw await fail(DaemonStartupError(String(describing: error)))
        }
        // Counted only when someone can read them: metrics_socket = "" costs calls nothing.
        let metrics = configuration.metricsSocketPath != nil || configuration.metricsListen != nil ? DaemonMetrics() : nil
        let environment = SessionEnvironment(
            store: store, http: callHTTP,
            sessions: LegacySessionClient(http: http, timeout: configuration.upstreamTimeout),
            oauth: OAuthEnvironment(http: http, policy: OAuthURLPolicy(allowInsecureLoopback: configuration.allowInsecureLoopback),
                                    client: oauthClient, timeout: configuration.upstreamTimeout,
                                    providers: configuration.providers, now: { Date() }),
            rules: configuration.lifecycleRules, upstreamTimeout: configuration.upstreamTimeout, logger: logger,
            now: { Date() }, schedule: { id, due, server in scheduler.note(id, due, server: server) }, metrics: metrics)
        let accounts = AccountManager(store: store, scheduler: scheduler, environment: environment, identity: identity)
        store.health.observe { [events = environment.events] outage in
            if let outage {
                events.publish(.daemonStoreUnavailable, fields: [
                    "reason": .string(outage.reason), "since": AccountView.timestamp(outage.since)])
            } else {
                events.publish(.daemonStoreAvailable)
            }
        }
        // Listening starts before loading, so that no change another host makes in between is missed.
        let storeChanges = StoreChangeInbox()
        await store.observeChanges(keeping: { [environment] in environment.unsaved.withLock { $0 } }) {
            storeChanges.add($0)
        }
        do {
            try await accounts.loadAll()
        } catch {
            throw await fail(DaemonStartupError("cannot load the accounts: \(error)"))
        }
        // The load handed the sessions' first dates to the scheduler at once; what they noted
        // since goes in now, and the pages the load and the scheduler's tables passed through go back.
        await scheduler.takeInNotedDates()
        ReleaseFreedMemory.now()
        return DaemonCore(store: store, key: key, http: http, callHTTP: callHTTP, scheduler: scheduler,
                          sharedSchedule: sharedSchedule, sharedDates: sharedDates, environment: environment,
                          accounts: accounts, metrics: metrics, storeChanges: storeChanges)
    }
}
