import ATIdentity
import BlueskyHTTP
import BlueskyStore
import Foundation
import Logging
import RPCServer
import ServiceLifecycle
import Synchronization
import XRPC

/// blueskyd itself: opens the store, loads the accounts, runs the schedule and the socket
/// until SIGTERM or SIGINT, then stops without cutting a refresh off.
public struct Daemon: Sendable {
    public let configuration: DaemonConfiguration
    let logger: Logger

    public init(configuration: DaemonConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    public func run() async throws(DaemonStartupError) {
        let stateDirectory = try startup(StateDirectory(path: URL(fileURLWithPath: configuration.stateDirectory)))
        let lock: InstanceLock
        do {
            lock = try stateDirectory.acquireInstanceLock()
        } catch let error as StoreError {
            if case .alreadyRunning = error { throw DaemonStartupError(error.description, exitCode: .alreadyRunning) }
            throw DaemonStartupError(error.description)
        } catch {
            throw DaemonStartupError(String(describing: error))
        }
        defer { withExtendedLifetime(lock) {} }
        let key = try startup(StoreKey.load(keyFile: stateDirectory.url.appendingPathComponent("store.key")))
        let store = try startup(AccountStore(directory: stateDirectory.url, key: key, logger: logger))
        let policy = HTTPPolicy(allowInsecureLoopback: configuration.allowInsecureLoopback)
        // Logins, refreshes and identity lookups go through async-http-client; proxied calls,
        // the hot path, through the lean keep-alive client on the caller's event loop.
        let http = try startup(OutboundHTTP(.init(policy: policy, extraCAFile: configuration.extraCAFile)))
        let callHTTP = try startup(KeepAliveHTTPClient(.init(policy: policy, extraCAFile: configuration.extraCAFile)))
        guard let plcURL = URL(string: configuration.plcURL) else {
            throw DaemonStartupError("plc_url is not a URL: \(configuration.plcURL)")
        }
        let dns = try startup(DNSTXTResolver(nameservers: configuration.nameservers))
        let identity = IdentityResolver(http: http, dns: dns, plcURL: plcURL, logger: logger)
        let scheduler = RefreshScheduler(maxConcurrent: configuration.maxConcurrentRefreshes, now: { Date() })
        let environment = SessionEnvironment(
            store: store, http: callHTTP,
            sessions: LegacySessionClient(http: http, timeout: configuration.upstreamTimeout),
            refreshAhead: configuration.refreshAhead,
            backoff: Backoff(initial: configuration.retryInitial, maximum: configuration.retryMax),
            upstreamTimeout: configuration.upstreamTimeout, logger: logger, now: { Date() },
            reschedule: { id, date in await scheduler.schedule(id, at: date) })
        let accounts = AccountManager(store: store, scheduler: scheduler, environment: environment, identity: identity)
        do {
            try await accounts.loadAll()
        } catch {
            throw DaemonStartupError("cannot load the accounts: \(error)")
        }

        let stopping = Atomic(false)
        let methods = DaemonMethods(
            accounts: accounts, proxy: XRPCProxy(registry: accounts.registry, environment: environment),
            info: DaemonInfo(socketPath: configuration.socketPath, stateDirectory: stateDirectory.url.path,
                             startedAt: Date()),
            isStopping: { stopping.load(ordering: .relaxed) })
        let server = RPCServer(
            socketPath: configuration.socketPath,
            configuration: .init(maxLineBytes: configuration.maxLineBytes,
                                 maxConcurrentRequestsPerConnection: configuration.maxRequestsPerConnection),
            handler: methods, logger: logger)

        let group = ServiceGroup(
            services: [
                SchedulerService(scheduler: scheduler, accounts: accounts),
                SocketService(server: server, onShutdown: { stopping.store(true, ordering: .relaxed) }),
            ],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger)
        logger.info("blueskyd started", metadata: [
            "socket": "\(configuration.socketPath)", "stateDirectory": "\(stateDirectory.url.path)",
            "accounts": "\(accounts.registry.count)", "storeKey": "\(StoreKey.keyFingerprint(key))",
        ])
        var failure: DaemonStartupError?
        do {
            try await group.run()
        } catch {
            failure = DaemonStartupError(String(describing: error))
        }
        await callHTTP.shutdown()
        try? await http.shutdown()
        try? store.close()
        if let failure {
            logger.error("blueskyd stopped on an error", metadata: ["error": "\(failure)"])
            throw failure
        }
        logger.info("blueskyd stopped")
    }

    /// One start-up step; its failure becomes the one line blueskyd exits with.
    private func startup<T>(_ body: @autoclosure () throws -> T) throws(DaemonStartupError) -> T {
        do { return try body() } catch { throw DaemonStartupError(String(describing: error)) }
    }
}

/// Why blueskyd could not start, in one line.
public struct DaemonStartupError: Error, CustomStringConvertible {
    public var description: String
    public var exitCode: DaemonExitCode
    public init(_ description: String, exitCode: DaemonExitCode = .failure) {
        self.description = description
        self.exitCode = exitCode
    }
}

/// Runs the refresh schedule; on shutdown, waits for refreshes in flight to finish.
struct SchedulerService: Service {
    let scheduler: RefreshScheduler
    let accounts: AccountManager

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await scheduler.run { id in await accounts.scheduledRefresh(id) }
        }
    }
}

/// Serves the JSON-RPC socket; on shutdown stops accepting and lets calls in progress finish.
struct SocketService: Service {
    let server: RPCServer
    let onShutdown: @Sendable () -> Void

    func run() async throws {
        try await withGracefulShutdownHandler {
            try await cancelWhenGracefulShutdown { try await server.run() }
        } onGracefulShutdown: {
            onShutdown()
        }
    }
}
