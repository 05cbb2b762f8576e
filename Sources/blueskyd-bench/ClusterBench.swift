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

    let options: BenchOptions
    let workDirectory: String
    let progress: ProgressLog

    static func timeBudget(_ options: BenchOptions) -> Double {
        Double(options.clusterAccounts) * 0.0008 + Double(options.stormAccounts) * 0.02 + 900
    }

    func run() async -> ClusterResult {
        var result = ClusterResult(accounts: options.clusterAccounts, stormAccounts: options.stormAccounts,
                                   tokenEndpointLatencyMilliseconds: options.refreshLatencyMilliseconds)
        let directory = workDirectory + "/cluster"
        var database: ClusterDatabase?
        var upstream: StartedUpstream?
        var hosts: [DaemonProcess] = []
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            progress.say("cluster: starting PostgreSQL and a testbed whose token endpoint answers after \(options.refreshLatencyMilliseconds) ms")
            database = try ClusterDatabase.start(directory: directory)
            upstream = try await StartedUpstream.start(
                directory: directory + "/testbed",
                settings: UpstreamSettings(nonceRotationSeconds: options.nonceRotationSeconds,
                                           refreshLatencyMilliseconds: options.refreshLatencyMilliseconds,
                                           oauthAccessTokenLifetimeSeconds: 2 * 3600),
                inProcess: options.inProcessUpstream)
            try await measure(database: database!, upstream: upstream!, directory: directory, hosts: &hosts, into: &result)
        } catch {
            result.error = describe(error)
        }
        for host in hosts where host.isRunning {
            _ = await host.stop()
            Watchdog.untrack(host.pid)
        }
        await upstream?.stop()
        database?.server.destroy()
        return result
    }

    private func measure(database: ClusterDatabase, upstream: StartedUpstream, directory: String,
                         hosts: inout [DaemonProcess], into result: inout ClusterResult) async throws {
        let storm = options.stormAccounts
        let failover = max(1, storm / 4)
        progress.say("cluster: minting \(storm + failover) OAuth sessions at the testbed")
        let keys = (0..<(storm + failover)).map { _ in DPoPKey.generate() }
        let client = OAuthFakeAccounts.loopbackClient
        // Expiring within blueskyd's refresh lead: due as soon as the schedule says so.
        let expiry = Date().addingTimeInterval(60)
        let sessions = try await upstream.control.mintOAuthSessions(
            MintRequest(clientID: client.clientID, scope: client.scope, sessions: keys.enumerated().map { index, key in
                OAuthSessionMintRequest(name: "cl-\(index)", thumbprint: key.thumbprint, accessExpiresAt: expiry)
            }), directory: directory)

        let idle = max(0, options.clusterAccounts - storm - failover)
        var clock = ContinuousClock.now
        progress.say("cluster: writing \(idle) idle and \(storm + failover) refreshable accounts into PostgreSQL")
        try database.seedIdle(count: idle, pdsURL: upstream.info.pdsURL, progress: progress)
        let stormIDs = try database.seedRefreshable(
            sessions: Array(sessions[0..<storm]), keys: Array(keys[0..<storm]), issuer: upstream.info.oauthIssuer,
            pdsURL: upstream.info.pdsURL, firstIndex: 0)
        let failoverIDs = try database.seedRefreshable(
            sessions: Array(sessions[storm...]), keys: Array(keys[storm...]), issuer: upstream.info.oauthIssuer,
            pdsURL: upstream.info.pdsURL, firstIndex: storm)
        result.seedSeconds = lap(&clock)

        let config = try database.writeConfiguration(directory: directory)
        progress.say("cluster: starting \(Self.hostCount) blueskyd hosts, each loading \(options.clusterAccounts) accounts")
        try await withThrowingTaskGroup(of: DaemonProcess.self) { group in
            for index in 0..<Self.hostCount {
                let hostDirectory = directory + "/host\(index)"
                try database.provisionHost(stateDirectory: hostDirectory + "/state")
                group.addTask {
                    try await DaemonProcess(directory: hostDirectory, testbed: nil,
                                            extraArguments: DaemonArguments.forUpstream(upstream.info) + ["--config", config])
                }
            }
            for try await host in group {
                Watchdog.track(host.pid)
                hosts.append(host)
            }
        }
        result.startSeconds = lap(&clock)
        for host in hosts {
            result.accountsLoaded.append(try await host.call("daemon.status")["accounts"]?.intValue ?? 0)
            result.hostRSSKiB.append(ProcessMemory.read(pid: host.pid)?.rssKiB ?? 0)
        }

        // The storm: every refreshable account due at once.
        progress.say("cluster: \(storm) accounts due at once")
        try database.makeDue(stormIDs)
        let stormStart = Date()
        let stormTimes = try await waitForRefreshes(upstream: upstream, target: storm, limit: Double(storm) * 0.05 + 120)
        result.stormSeconds = stormTimes.last.map { $0.timeIntervalSince(stormStart) }
        result.stormRate = Self.rate(stormTimes, count: storm)
        for host in hosts { result.rotatedByHost.append(try await host.call("daemon.status")["tokensRotated"]?.intValue ?? 0) }

        // Failover: a second storm, and one host killed when a third of it is done.
        progress.say("cluster: \(failover) accounts due at once; one host is SIGKILLed a third of the way")
        try database.makeDue(failoverIDs)
        _ = try await waitForRefreshes(upstream: upstream, target: storm + failover / 3, limit: 120)
        let killed = hosts.removeLast()
        await killed.crash()
        Watchdog.untrack(killed.pid)
        let killedAt = Date()
        let after = try await waitForRefreshes(upstream: upstream, target: storm + failover, limit: 300)
        result.failoverSeconds = after.last.map { $0.timeIntervalSince(killedAt) }
        result.totals = try await upstream.control.oauthTotals()
        for host in hosts {
            let status = try await host.call("daemon.status")
            result.finalActive.append(status["active"]?.intValue ?? 0)
            result.needsLogin = status["needsLogin"]?.intValue ?? 0
        }

        // The proxy's added latency: a host of the cluster, then a SQLite daemon.
        try await proxyLatency(cluster: hosts[0], upstream: upstream.info, directory: directory, into: &result)
    }

    /// Polls the testbed until `target` accounts were refreshed; the times each count was seen.
    private func waitForRefreshes(upstream: StartedUpstream, target: Int, limit: TimeInterval) async throws -> [Date] {
        let giveUp = Date().addingTimeInterval(limit)
        var seen: [Date] = []
        var last = 0
        while true {
            let done = try await upstream.control.refreshProgress().refreshedAccounts
            if done > last {
                seen += Array(repeating: Date(), count: done - last)
                last = done
            }
            if done >= target { return seen }
            guard Date() < giveUp else { throw BenchError.unexpectedReply("only \(done) of \(target) accounts refreshed in \(Int(limit)) s") }
            try await Task.sleep(for: .milliseconds(200))
        }
    }

    /// Refreshes per second between the 10th and the 90th percent of the storm.
    static func rate(_ times: [Date], count: Int) -> Double? {
        guard count >= 10, times.count >= count else { return nil }
        let first = times[count / 10], last = times[count * 9 / 10 - 1]
        let span = last.timeIntervalSince(first)
        return span > 0 ? Double(count * 9 / 10 - count / 10) / span : nil
    }

    private func proxyLatency(cluster: DaemonProcess, upstream: UpstreamInfo, directory: String,
                              into result: inout ClusterResult) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
        let client = try DirectClient.make(caFile: upstream.caFile, connections: 1, group: group)
        var sqlite: DaemonProcess?
        defer {
            Task { [sqlite] in _ = await sqlite?.stop() }
        }
        do {
            let token = try await DirectClient.createSession(client: client, upstream: upstream)
            let direct = DirectEndpoint(client: client, request: try DirectClient.profileRequest(upstream: upstream, accessToken: token))
            try FileManager.default.createDirectory(atPath: directory + "/sqlite", withIntermediateDirectories: true)
            let local = try await DaemonProcess(directory: directory + "/sqlite", testbed: nil,
                                                extraArguments: DaemonArguments.forUpstream(upstream))
            sqlite = local
            Watchdog.track(local.pid)
            for daemon in [cluster, local] {
                try await daemon.call("accounts.add", ["identifier": .string(upstream.did), "password": .string(upstream.appPassword)])
            }
            // Twice each, alternating; the first pair warms both up, the second is reported.
            for (name, daemon) in [("PostgreSQL", cluster), ("SQLite", local), ("PostgreSQL", cluster), ("SQLite", local)] {
                progress.say("cluster: proxy latency through the \(name) daemon against direct calls")
                let sides = SideBySide(options: options, progress: progress, prefix: "cluster \(name): ", daemon: daemon,
                                       requestLine: BenchRequest.line(did: upstream.did), group: group)
                let latency = try await sides.latency(direct: direct)
                if name == "SQLite" { result.sqliteLatency = latency } else { result.postgresLatency = latency }
            }
            _ = await local.stop()
            Watchdog.untrack(local.pid)
            sqlite = nil
        } catch {
            result.error = "proxy latency: \(describe(error))"
        }
        try? await client.shutdown()
        try? await group.shutdownGracefully()
    }

    private func lap(_ clock: inout ContinuousClock.Instant) -> Double {
        let now = ContinuousClock.now
        defer { clock = now }
        return (now - clock).inSeconds
    }
}
