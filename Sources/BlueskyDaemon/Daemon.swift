import ATIdentity
import AccountStoreCore
import ATOAuth
import BlueskyHTTP
import Foundation
import Logging
import RPCServer
import ServiceLifecycle
import Synchronization
import SystemdGlue
import XRPCGateway
import WebBasics
import XRPC

/// blueskyd itself: opens the store, loads the accounts, runs the schedule and the socket
/// until SIGTERM or SIGINT, then stops without cutting a refresh off.
public struct Daemon: Sendable {
    public let configuration: DaemonConfiguration
    let logger: Logger
    let logLevel: LogLevelControl
    let readConfiguration: @Sendable () throws(ConfigurationError) -> DaemonConfiguration

    /// - Parameters:
    ///   - logLevel: the level the log handlers follow; a reload changes it.
    ///   - readConfiguration: reads the configuration again for a SIGHUP reload, with the same
    ///     precedence as at start (the default keeps `configuration`).
    public init(configuration: DaemonConfiguration, logger: Logger, logLevel: LogLevelControl? = nil,
                readConfiguration: (@Sendable () throws(ConfigurationError) -> DaemonConfiguration)? = nil) {
        self.configuration = configuration
        self.logger = logger
        self.logLevel = logLevel ?? LogLevelControl(configuration.logLevel)
        self.readConfiguration = readConfiguration ?? { configuration }
    }

    public func run() async throws(DaemonStartupError) {
        ReleaseFreedMemory.keepLargeBlocksMapped()
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
        let core = try await startCore(stateDirectory: stateDirectory)
        let (key, http, environment, accounts, scheduler, metrics) =
            (core.key, core.http, core.environment, core.accounts, core.scheduler, core.metrics)
        let (sharedSchedule, sharedDates, storeChanges) = (core.sharedSchedule, core.sharedDates, core.storeChanges)
        let stopping = Atomic(false)
        let listener = try startup(try socketListener())
        let gatewayListener = try startup(try gatewayListener())
        let proxy = XRPCProxy(registry: accounts.registry, environment: environment,
                              pdsChanged: { session, used async throws(DaemonError) in
                                  try await accounts.pdsChanged(of: session, from: used)
                              }, tokenRefused: { accounts.refreshProfileSoon(of: $0) }, streaming: http)
        let tokens = GatewayTokens()
        let routes = GatewayRoutes(proxy: proxy, logger: logger, tokens: tokens)
        var gatewayConfiguration = GatewayServer.Configuration()
        gatewayConfiguration.refused = { metrics?.gatewayRefused(reason: $0.reason) }
        gatewayConfiguration.vouchedFor = { head in tokens.vouches(GatewayCaller(head).token) }
        let gateway = gatewayListener.map { gatewayListener in
            GatewayServer(listener: .unix(gatewayListener.listener), configuration: gatewayConfiguration,
                          handler: routes, logger: logger)
        }
        let loopbackGateway = configuration.gatewayListen.map { address in
            GatewayServer(listener: .loopback(host: address.host, port: address.port), configuration: gatewayConfiguration,
                          handler: routes, logger: logger)
        }
        let metricsServers = metricsServers(metrics, environment: environment, gatewayConfiguration: gatewayConfiguration)
        let execSockets = ExecSockets(socketDirectory: PrivateFiles.directory(of: listener.path), routes: routes,
                                      configuration: gatewayConfiguration, logger: logger)
        let methods = DaemonMethods(
            accounts: accounts,
            proxy: proxy,
            info: DaemonInfo(socketPath: listener.path, gatewaySocketPath: gatewayListener?.path,
                             loopbackGateway: loopbackGateway, metricsSocketPath: configuration.metricsSocketPath,
                             loopbackMetrics: metricsServers.first { if case .loopback = $0.listener { true } else { false } },
                             stateDirectory: stateDirectory.url.path, startedAt: Date(),
                             clientSocketPaths: configuration.clients.flatMap { [$0.socket, $0.gatewaySocket].compactMap { $0 } },
                             storeKeyFingerprint: StoreKey.keyFingerprint(key)),
            isStopping: { stopping.load(ordering: .relaxed) }, logger: logger, tokens: tokens,
            execSockets: execSockets)
        let clientServers = try clientServers(methods: methods, routes: routes, gatewayConfiguration: gatewayConfiguration)
        let tokenFile = try writeGatewayTokenFile(tokens: tokens)
        let server = RPCServer(
            listener: listener.listener,
            configuration: .init(maxLineBytes: configuration.maxLineBytes,
                                 maxConcurrentRequestsPerConnection: configuration.maxRequestsPerConnection),
            handler: methods, logger: logger)
        let reloader = ConfigurationReloader(
            running: configuration, read: readConfiguration, logLevel: logLevel, environment: environment,
            scheduler: scheduler, logger: logger)
        let notifier = SystemdNotifier()

        let group = ServiceGroup(
            services: [
                SchedulerService(scheduler: scheduler, accounts: accounts),
            ] + sharedScheduleServices(sharedSchedule, dates: sharedDates, scheduler: scheduler, accounts: accounts) + [
                StoreChangeService(accounts: accounts, inbox: storeChanges),
            ] + ([gateway, loopbackGateway].compactMap { $0 } + metricsServers).map(GatewayService.init) + clientServers + [
                execSockets as any Service,
                SocketService(server: server, onShutdown: {
                    stopping.store(true, ordering: .relaxed)
                    // Subscribers read this last event, then their streams end.
                    environment.events.close(last: .daemonStopping)
                }),
                // Last, so that it is the first to hear of the stop (services stop in reverse order).
                ServiceManagerService(
                    notifier: notifier, server: server, liveness: Liveness(scheduler: scheduler, server: server),
                    summary: StatusSummary(accounts: accounts, reloader: reloader), reloader: reloader,
                    watchdogTimeout: SystemdWatchdog.timeout(), logger: logger),
            ],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger)
        logger.info("blueskyd started", metadata: [
            "socket": "\(listener.path)", "socketActivated": "\(listener.activated)",
            "gateway": "\(gatewayListener.map { $0.path + ($0.activated ? " (activated)" : "") } ?? "off")",
            "gatewayListen": "\(configuration.gatewayListen?.description ?? "off")",
            "gatewayTokenFile": "\(tokenFile ?? "none")", "clients": "\(configuration.clients.count)",
            "metrics": "\(configuration.metricsSocketPath ?? "off")",
            "metricsListen": "\(configuration.metricsListen?.description ?? "off")",
            "stateDirectory": "\(stateDirectory.url.path)",
            "accounts": "\(accounts.registry.count)", "storeKey": "\(StoreKey.keyFingerprint(key))",
        ])
        var failure: DaemonStartupError?
        do {
            try await group.run()
        } catch let error as RPCServerError {
            // Another daemon serves the socket: the same "already running" as a locked state
            // directory, which systemd's RestartPreventExitStatus does not retry.
            if case .alreadyInUse = error {
                failure = DaemonStartupError(error.description, exitCode: .alreadyRunning)
            } else {
                failure = DaemonStartupError(error.description)
            }
        } catch {
            failure = DaemonStartupError(String(describing: error))
        }
        await core.close(logger: logger)
        if let failure {
            logger.error("blueskyd stopped on an error", metadata: ["error": "\(failure)"])
            throw failure
        }
        logger.info("blueskyd stopped")
    }

    /// The shared schedule's service, with a shared store; listed after the scheduler, so
    /// that it stops taking accounts first.
    private func sharedScheduleServices(_ schedule: (any SharedRefreshSchedule)?, dates: SharedDueWriter?,
                                        scheduler: RefreshScheduler, accounts: AccountManager) -> [any Service] {
        guard let schedule, let dates else { return [] }
        return [SharedScheduleService(schedule: schedule, dates: dates, scheduler: scheduler, accounts: accounts, logger: logger)]
    }

    /// One start-up step; its failure becomes the one line blueskyd exits with.
    /// A value of the configuration that cannot be used (a CA file, a nameserver) exits as a
    /// configuration error.
    func startup<T>(_ body: @autoclosure () throws -> T) throws(DaemonStartupError) -> T {
        do {
            return try body()
        } catch let error as HTTPError {
            if case .unusableCAFile = error { throw DaemonStartupError(error.description, exitCode: .configuration) }
            throw DaemonStartupError(error.description)
        } catch let error as DNSError {
            if case .invalidNameserver = error { throw DaemonStartupError(error.description, exitCode: .configuration) }
            throw DaemonStartupError(error.description)
        } catch {
            throw DaemonStartupError(String(describing: error))
        }
    }
}

/// Why blueskyd could not start, in one line.
public struct DaemonStartupError: Error, CustomStringConvertible {
    public var description: String
    public var exitCode: DaemonExitCode
    /// The store key opens nothing in the store (`Daemon.wrongStoreKey`).
    var isWrongKey = false
    public init(_ description: String, exitCode: DaemonExitCode = .failure) {
        self.description = description
        self.exitCode = exitCode
    }
}
