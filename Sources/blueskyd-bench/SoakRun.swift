import BlueskyHTTP
import DaemonHarness
import Foundation
import NIOCore
import NIOPosix

/// One soak: a testbed with short-lived tokens, blueskyd with its accounts logged in the way
/// users do, the steady load, and the testbed's and blueskyd's figures at the end.
struct SoakRun {
    let settings: UpstreamSettings
    let command: SoakCommand
    let progress: ProgressLog

    func run(into report: inout SoakReport) async {
        let work: TemporaryDirectory
        do {
            work = try TemporaryDirectory("blueskyd-soak")
        } catch {
            report.problems.append("cannot create a working directory: \(describe(error))")
            return
        }
        defer { work.remove() }
        progress.say("soak: starting the testbed (\(settings.summary))")
        let upstream: StartedUpstream
        do {
            upstream = try await StartedUpstream.start(
                directory: work.path + "/testbed", settings: settings, inProcess: command.inProcessUpstream)
        } catch {
            report.problems.append("upstream: \(describe(error)); is this running under scripts/hermetic-run?")
            return
        }
        report.upstream = upstream.description
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            try await soak(upstream: upstream, directory: work.path + "/soak", group: group, into: &report)
        } catch {
            report.problems.append("soak: \(describe(error))")
        }
        try? await group.shutdownGracefully()
        await upstream.stop()
    }

    private func soak(upstream: StartedUpstream, directory: String, group: any EventLoopGroup,
                      into report: inout SoakReport) async throws {
        let accounts = try await upstream.control.createAccounts(
            count: command.appPasswordAccounts + command.oauthAccounts, prefix: "soak")
        let appPassword = Array(accounts.prefix(command.appPasswordAccounts))
        let oauth = Array(accounts.dropFirst(command.appPasswordAccounts))
        progress.say("soak: starting blueskyd and logging in \(appPassword.count) app-password and \(oauth.count) OAuth accounts")
        let daemon: DaemonProcess
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            daemon = try await DaemonProcess(directory: directory, testbed: nil,
                                             extraArguments: DaemonArguments.forUpstream(upstream.info))
        } catch {
            throw BenchError.daemonFailed(describe(error))
        }
        try await daemon.runThenStop {
            try await logIn(appPassword: appPassword, oauth: oauth, daemon: daemon, caFile: upstream.info.caFile)
            try await load(accounts: accounts, daemon: daemon, group: group, into: &report)
            try await readCounters(appPassword: appPassword, upstream: upstream, daemon: daemon, into: &report)
        }
    }

    private func logIn(appPassword: [UpstreamAccount], oauth: [UpstreamAccount], daemon: DaemonProcess,
                       caFile: String) async throws {
        for account in appPassword {
            do {
                try await daemon.call("accounts.add", ["identifier": .string(account.did), "password": .string(account.appPassword)])
            } catch {
                throw BenchError.daemonFailed("accounts.add: \(describe(error))")
            }
        }
        guard !oauth.isEmpty else { return }
        let http = try OutboundHTTP(.init(extraCAFile: caFile))
        do {
            for account in oauth { try await DaemonOAuthLogin.login(daemon: daemon, did: account.did, http: http) }
        } catch {
            try? await http.shutdown()
            throw error
        }
        try? await http.shutdown()
    }

    /// The steady load, with blueskyd sampled at its start and then every `sampleSeconds`.
    private func load(accounts: [UpstreamAccount], daemon: DaemonProcess, group: any EventLoopGroup,
                      into report: inout SoakReport) async throws {
        var connections: [SoakConnection] = []
        for _ in 0..<command.connections {
            connections.append(try await SoakConnection.connect(socketPath: daemon.socketPath, group: group))
        }
        let tally = SoakTally()
        let load = SoakLoad(connections: connections, requestLines: accounts.map { BenchRequest.line(did: $0.did) },
                            callsPerSecond: command.rate, tally: tally)
        let watch = ProcessWatch(pid: daemon.pid)
        watch.sample()
        progress.say("soak: \(format(command.minutes, 1)) min at \(format(command.rate, 0)) calls/s")
        let started = ContinuousClock.now
        let end = started + .seconds(command.minutes * 60)
        let loadTask = Task { await load.run(until: end) }
        var nextSample = started + .seconds(command.sampleSeconds)
        while nextSample <= end {
            try? await Task.sleep(until: nextSample)
            let sample = watch.sample()
            let calls = tally.snapshot
            progress.say("soak: \(format(sample.at / 60, 0)) min: \(calls.completed) calls, \(calls.failedByRefresh) failed "
                + "by refreshing, \(calls.failedOtherwise) otherwise; RSS \(sample.rssKiB.map(mebibytes) ?? "?")")
            guard daemon.isRunning else {
                // A dead daemon fails every call: the rest of the minutes would measure nothing.
                loadTask.cancel()
                break
            }
            nextSample = nextSample + .seconds(command.sampleSeconds)
        }
        await loadTask.value
        // The last sample is the end of the load, unless one was just taken.
        if let last = watch.samples.last, (ContinuousClock.now - started).inSeconds - last.at > 5 { watch.sample() }
        report.loadSeconds = (ContinuousClock.now - started).inSeconds
        for connection in connections { await connection.close() }
        guard daemon.isRunning else { throw BenchError.daemonFailed("blueskyd exited during the soak") }
        report.samples = watch.samples
        let cpu = watch.samples.compactMap(\.cpuSeconds)
        if let first = cpu.first, let last = cpu.last { report.daemonCPUSeconds = last - first }
        report.calls = tally.snapshot
        let latencies = report.calls.latenciesMilliseconds
        report.latencyP50Milliseconds = Statistics.quantile(latencies, 0.5)
        report.latencyP99Milliseconds = Statistics.quantile(latencies, 0.99)
        report.latencyMaxMilliseconds = latencies.max()
    }

    private func readCounters(appPassword: [UpstreamAccount], upstream: StartedUpstream, daemon: DaemonProcess,
                              into report: inout SoakReport) async throws {
        for account in appPassword {
            let counters = try await upstream.control.appPasswordCounters(did: account.did)
            report.appPasswordRefreshes += counters.refreshes
            report.appPasswordRefreshTokenReuses += counters.refreshTokenReuses
            report.appPasswordRejectedRefreshes += counters.rejectedRefreshes
            report.appPasswordExpiredTokenRejections += counters.expiredAccessRejections
        }
        // The soak's OAuth accounts hold the testbed's only OAuth sessions: its totals are theirs.
        let totals = try await upstream.control.oauthTotals()
        report.oauthTotals = totals
        report.oauthRefreshes = totals.refreshes
        report.oauthInvalidTokenRejections = totals.invalidTokenRejections
        let status = try await daemon.call("daemon.status")
        for state in ["active", "retrying", "needsLogin"] { report.finalStates[state] = status[state]?.intValue }
    }
}
