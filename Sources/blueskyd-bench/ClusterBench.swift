import AsyncHTTPClient
import ATTestbed
import DaemonHarness
import DPoP
import Foundation
import NIOCore
import NIOPosix

/// The cluster section: three blueskyd hosts sharing one PostgreSQL database with
/// `clusterAccounts` accounts. An expiry storm of `stormAccounts` OAuth accounts (the rest idle)
/// against a token endpoint answering after `refreshLatency`: refreshes per second the cluster
/// sustains, and how they spread. A second storm during which one host is SIGKILLed: how long
/// until every account it had taken is refreshed by the others. Then the proxy's added latency
/// on a host of the cluster and on a SQLite daemon, each against direct calls, in the same run.
struct ClusterBench {
    static let section = "cluster"
    static let hostCount = 3
    /// blueskyd's default lease, written into the hosts' configuration.
    static let leaseSeconds = 60

    let options: BenchOptions
    let workDirectory: String
    let progress: ProgressLog

    /// How long three hosts may take to load every account and answer.
    static func startTimeout(_ options: BenchOptions) -> Double { 60 + Double(options.clusterAccounts) / 2_000 }
    static func stormTimeout(_ options: BenchOptions) -> Double { Double(options.stormAccounts) * 0.05 + 120 }
    static let failoverTimeout = Double(leaseSeconds) * 5

    /// How long the section may take at most (the benchmark's time limit grows by this).
    static func timeBudget(_ options: BenchOptions) -> Double {
        Double(options.clusterAccounts) * 0.0008 + startTimeout(options) + stormTimeout(options) * 1.5
            + failoverTimeout + 600
    }

    func run() async -> ClusterResult {
        var result = ClusterResult(accounts: options.clusterAccounts, stormAccounts: options.stormAccounts,
                                   tokenEndpointLatencyMilliseconds: options.refreshLatencyMilliseconds,
                                   leaseSeconds: Self.leaseSeconds, refreshesPerServer: options.stormRefreshesPerServer)
        let directory = workDirectory + "/cluster"
        var database: ClusterDatabase?
        var upstream: StartedUpstream?
        var hosts: [DaemonProcess] = []
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            progress.say("cluster: starting PostgreSQL and a testbed whose token endpoint answers after \(options.refreshLatencyMilliseconds) ms")
            let started = try await ClusterDatabase.start(directory: directory)
            database = started
            let testbed = try await StartedUpstream.start(
                directory: directory + "/testbed",
                settings: UpstreamSettings(nonceRotationSeconds: options.nonceRotationSeconds,
                                           refreshLatencyMilliseconds: options.refreshLatencyMilliseconds,
                                           oauthAccessTokenLifetimeSeconds: 2 * 3600),
                inProcess: options.inProcessUpstream)
            upstream = testbed
            try await measure(database: started, upstream: testbed, directory: directory, hosts: &hosts, into: &result)
        } catch {
            result.error = describe(error)
        }
        for host in hosts where host.isRunning {
            _ = await host.stop()
            Watchdog.untrack(host.pid)
        }
        await upstream?.stop()
        await database?.stop()
        return result
    }

    private func measure(database: ClusterDatabase, upstream: StartedUpstream, directory: String,
                         hosts: inout [DaemonProcess], into result: inout ClusterResult) async throws {
        let storm = options.stormAccounts
        let failover = max(1, storm / 4)
        progress.say("cluster: minting \(storm + failover) OAuth sessions at the testbed")
        let keys = (0..<(storm + failover)).map { _ in DPoPKey.generate() }
        let client = SeededOAuthAccounts.loopbackClient
        // Their access tokens have lapsed by the storm (seeding and starting take minutes): each
        // account is due as soon as the schedule says so, and its refresh token still works.
        let expiry = Date().addingTimeInterval(60)
        let sessions = try await upstream.control.mintOAuthSessions(
            MintRequest(clientID: client.clientID, scope: client.scope, sessions: keys.enumerated().map { index, key in
                OAuthSessionMintRequest(name: "cl-\(index)", thumbprint: key.thumbprint, accessExpiresAt: expiry)
            }), directory: directory)

        let idle = max(0, options.clusterAccounts - storm - failover)
        var clock = ContinuousClock.now
        progress.say("cluster: writing \(idle) idle and \(storm + failover) refreshable accounts into PostgreSQL")
        try await database.seedIdle(count: idle, pdsURL: upstream.info.pdsURL, progress: progress)
        let (issuer, pds) = (upstream.info.oauthIssuer, upstream.info.pdsURL)
        let stormIDs = try await database.seedRefreshable(sessions: sessions[0..<storm], keys: keys[0..<storm], issuer: issuer, pdsURL: pds)
        let failoverIDs = try await database.seedRefreshable(sessions: sessions[storm...], keys: keys[storm...], issuer: issuer, pdsURL: pds)
        // As `blueskyd store copy` does after its rows: the planner's view of the table is
        // otherwise the empty one it had before the seeding, for a minute or more.
        await database.seeding.store.refreshStatistics()
        result.seedSeconds = lap(&clock)

        hosts = try await startHosts(database: database, upstream: upstream.info, directory: directory)
        result.startSeconds = lap(&clock)
        for host in hosts {
            result.accountsLoaded.append(try await host.call("daemon.status")["accounts"]?.intValue ?? 0)
            result.hostRSSKiB.append(ProcessMemory.read(pid: host.pid)?.rssKiB ?? 0)
        }

        // The storm: every refreshable account due at once.
        progress.say("cluster: \(storm) accounts due at once")
        let (databaseBefore, hostsBefore) = (try database.reading(), Self.cpuSeconds(of: hosts))
        let stormStart = Date()
        try await database.seeding.makeDue(stormIDs)
        try await waitForRefreshes(upstream: upstream, target: storm, limit: Self.stormTimeout(options))
        // The testbed counts a refresh before the host has saved its tokens: wait for the saves.
        result.rotatedByHost = try await rotations(of: hosts, atLeast: storm)
        let hostsCPU = Self.cpuSeconds(of: hosts) - hostsBefore
        // An idle backend reports its transactions and rows at most 10 s late (PostgreSQL 15's
        // PGSTAT_IDLE_INTERVAL); statements are counted as they end.
        try await Task.sleep(for: .seconds(11))
        result.stormCost = DatabaseCost(from: databaseBefore, to: try database.reading(), hostsCPUSeconds: hostsCPU,
                                        refreshes: result.rotatedByHost.reduce(0, +))
        let stormDIDs = Set(sessions[0..<storm].map(\.did))
        let stormTimes = try await refreshTimes(upstream: upstream, of: stormDIDs, directory: directory)
        result.stormSeconds = stormTimes.last.map { $0.timeIntervalSince(stormStart) }
        result.stormRate = Self.rate(stormTimes)

        // Failover: a second storm, and one host killed when a third of it is done.
        progress.say("cluster: \(failover) accounts due at once; one host is SIGKILLed a third of the way")
        try await database.seeding.makeDue(failoverIDs)
        try await waitForRefreshes(upstream: upstream, target: storm + failover / 3, limit: Self.stormTimeout(options))
        let killed = hosts.removeLast()
        let killedAt = Date()
        await killed.crash()
        Watchdog.untrack(killed.pid)
        try await waitForRefreshes(upstream: upstream, target: storm + failover, limit: Self.failoverTimeout)
        let failoverDIDs = Set(sessions[storm...].map(\.did))
        let failoverTimes = try await refreshTimes(upstream: upstream, of: failoverDIDs, directory: directory)
        result.failoverSeconds = failoverTimes.last.map { $0.timeIntervalSince(killedAt) }
        result.totals = try await upstream.control.oauthTotals()
        for host in hosts {
            let status = try await host.call("daemon.status")
            result.finalActive.append(status["active"]?.intValue ?? 0)
            result.needsLogin = max(result.needsLogin, status["needsLogin"]?.intValue ?? 0)
        }

        // The proxy's added latency: a host of the cluster, then a SQLite daemon.
        try await proxyLatency(cluster: hosts[0], upstream: upstream.info, directory: directory, into: &result)
    }

    /// Starts the hosts together, each with the shared key; returned in the order of their
    /// directories (host0, host1, ...).
    private func startHosts(database: ClusterDatabase, upstream: UpstreamInfo, directory: String) async throws -> [DaemonProcess] {
        let config = try database.writeConfiguration(directory: directory, leaseSeconds: Self.leaseSeconds,
                                                     perServer: options.stormRefreshesPerServer)
        progress.say("cluster: starting \(Self.hostCount) blueskyd hosts, each loading \(options.clusterAccounts) accounts")
        let timeout = Duration.seconds(Self.startTimeout(options))
        return try await withThrowingTaskGroup(of: (Int, DaemonProcess).self) { group in
            for index in 0..<Self.hostCount {
                group.addTask {
                    let host = try await SharedStoreHosts.startHost(
                        index, in: directory, keyHex: database.keyHex, config: config, testbed: nil,
                        extraArguments: DaemonArguments.forUpstream(upstream), readyTimeout: timeout)
                    Watchdog.track(host.pid)
                    return (index, host)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }

    /// Polls the testbed until `target` accounts were refreshed, at most `limit` seconds.
    private func waitForRefreshes(upstream: StartedUpstream, target: Int, limit: TimeInterval) async throws {
        let giveUp = Date().addingTimeInterval(limit)
        while true {
            let done = try await upstream.control.refreshProgress().refreshedAccounts
            if done >= target { return }
            guard Date() < giveUp else { throw BenchError.unexpectedReply("only \(done) of \(target) accounts refreshed in \(Int(limit)) s") }
            try await Task.sleep(for: .milliseconds(200))
        }
    }

    /// Tokens each host rotated, once they add up to `count` (at most a minute later).
    private func rotations(of hosts: [DaemonProcess], atLeast count: Int) async throws -> [Int] {
        let giveUp = Date().addingTimeInterval(60)
        while true {
            let rotated = try await SharedStoreHosts.tokensRotated(hosts)
            if rotated.reduce(0, +) >= count || Date() > giveUp { return rotated }
            try await Task.sleep(for: .milliseconds(200))
        }
    }

    /// When the testbed granted each of these accounts' refreshes, in order (its own clock).
    private func refreshTimes(upstream: StartedUpstream, of dids: Set<String>, directory: String) async throws -> [Date] {
        try await upstream.control.refreshMargins(directory: directory).filter { dids.contains($0.did) }.map(\.refreshedAt).sorted()
    }

    static func cpuSeconds(of hosts: [DaemonProcess]) -> Double {
        hosts.reduce(0) { $0 + (ProcessCPU.read(pid: $1.pid)?.seconds ?? 0) }
    }

    /// Refreshes per second between the 10th and the 90th percent of `times` (sorted).
    static func rate(_ times: [Date]) -> Double? {
        guard times.count >= 10 else { return nil }
        let first = times.count / 10, last = times.count * 9 / 10 - 1
        let span = times[last].timeIntervalSince(times[first])
        return span > 0 ? Double(last - first) / span : nil
    }

    private func proxyLatency(cluster: DaemonProcess, upstream: UpstreamInfo, directory: String,
                              into result: inout ClusterResult) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
        let client = try DirectClient.make(caFile: upstream.caFile, connections: 1, group: group)
        do {
            let token = try await DirectClient.createSession(client: client, upstream: upstream)
            let direct = DirectEndpoint(client: client, request: try DirectClient.profileRequest(upstream: upstream, accessToken: token))
            try FileManager.default.createDirectory(atPath: directory + "/sqlite", withIntermediateDirectories: true)
            let local = try await DaemonProcess(directory: directory + "/sqlite", testbed: nil,
                                                extraArguments: DaemonArguments.forUpstream(upstream))
            try await local.runThenStop {
                for daemon in [cluster, local] {
                    try await daemon.call("accounts.add", ["identifier": .string(upstream.did), "password": .string(upstream.appPassword)])
                    guard try await daemon.call("xrpc.call", BenchRequest.params(did: upstream.did))["status"]?.intValue == 200 else {
                        throw BenchError.unexpectedReply("a call through \(daemon.socketPath) did not return status 200")
                    }
                }
                // Twice each, alternating; the first pair warms both up, the second is reported.
                for (name, daemon) in [("PostgreSQL", cluster), ("SQLite", local), ("PostgreSQL", cluster), ("SQLite", local)] {
                    progress.say("cluster: proxy latency through the \(name) daemon against direct calls")
                    let sides = SideBySide(options: options, progress: progress, prefix: "cluster \(name): ", daemon: daemon,
                                           requestLine: BenchRequest.line(did: upstream.did), group: group)
                    let latency = try await sides.latency(direct: direct)
                    if name == "SQLite" { result.sqliteLatency = latency } else { result.postgresLatency = latency }
                }
            }
        } catch {
            result.error = "proxy latency: \(describe(error))"
        }
        try? await client.shutdown()
        try? await group.shutdownGracefully()
    }
}
