import ATTestbed
import DaemonHarness
import DPoP
import Foundation

/// The refresh-capacity section: `accounts` OAuth accounts whose access tokens all expire within
/// one window, and a token endpoint that takes `refreshLatency` to answer. blueskyd runs on its
/// defaults; the testbed records how long before expiry each token was refreshed.
///
/// The sessions are minted at the testbed in bulk (no browser logins) and written into a fresh
/// store as blueskyd's logins would have, each with its own DPoP key. The window starts about
/// `lead` after blueskyd starts (minting, writing the store and starting take time the window
/// must allow for), so that nothing is due then (blueskyd refreshes 300 s plus up to 20 % before
/// expiry); the refreshes hand out tokens that outlive the run, so each account is refreshed once.
struct RefreshCapacityBench {
    static let section = "refresh-capacity"
    /// How long ago the seeded tokens were issued: the daemon's lead time is at most a quarter of
    /// a token's life, so an hour-long token gets its full 300 s (plus jitter).
    static let seededTokenAge: TimeInterval = 3600
    static let pollSeconds = 5.0
    /// Minting, writing the store and starting blueskyd take about half a millisecond per
    /// account in a release build (twice that in a debug one): the window starts this much later.
    static let setupSecondsPerAccount = 0.001

    let options: BenchOptions
    let workDirectory: String
    let progress: ProgressLog

    var settings: UpstreamSettings {
        UpstreamSettings(nonceRotationSeconds: options.nonceRotationSeconds,
                         refreshLatencyMilliseconds: options.refreshLatencyMilliseconds,
                         oauthAccessTokenLifetimeSeconds: options.refreshedTokenLifetimeMinutes * 60)
    }

    /// How long the section may take at most (the benchmark's time limit grows by this).
    static func timeBudget(_ options: BenchOptions) -> Double {
        (options.refreshLeadMinutes + options.refreshWindowMinutes) * 60
            + Double(options.refreshAccounts) * (setupSecondsPerAccount + 0.005) + 300
    }

    func run() async -> RefreshCapacityResult {
        var result = RefreshCapacityResult(
            accounts: options.refreshAccounts, windowSeconds: options.refreshWindowMinutes * 60,
            tokenEndpointLatencyMilliseconds: options.refreshLatencyMilliseconds,
            refreshedTokenLifetimeSeconds: options.refreshedTokenLifetimeMinutes * 60)
        progress.say("refresh-capacity: starting a testbed whose token endpoint answers after \(options.refreshLatencyMilliseconds) ms")
        let upstream: StartedUpstream
        do {
            upstream = try await StartedUpstream.start(
                directory: workDirectory + "/testbed-refresh", settings: settings, inProcess: options.inProcessUpstream)
        } catch {
            result.error = describe(error)
            return result
        }
        result.upstream = upstream.description
        do {
            try await measure(upstream: upstream, into: &result)
        } catch {
            result.error = describe(error)
        }
        await upstream.stop()
        return result
    }

    private func measure(upstream: StartedUpstream, into result: inout RefreshCapacityResult) async throws {
        let count = options.refreshAccounts
        progress.say("refresh-capacity: generating \(count) DPoP keys")
        var clock = ContinuousClock.now
        let keys = (0..<count).map { _ in DPoPKey.generate() }
        result.keySeconds = lap(&clock)

        let windowStart = Date().addingTimeInterval(options.refreshLeadMinutes * 60 + Double(count) * Self.setupSecondsPerAccount)
        let window = options.refreshWindowMinutes * 60
        progress.say("refresh-capacity: minting \(count) sessions at the testbed, tokens expiring over "
            + "\(format(window / 60, 1)) min from \(format(windowStart.timeIntervalSinceNow / 60, 1)) min from now")
        let requests = keys.enumerated().map { index, key in
            OAuthSessionMintRequest(name: "rc-\(index)", thumbprint: key.thumbprint,
                                    accessExpiresAt: windowStart.addingTimeInterval(window * (Double(index) + 0.5) / Double(count)))
        }
        let client = SeededOAuthAccounts.loopbackClient
        let sessions = try await upstream.control.mintOAuthSessions(
            MintRequest(clientID: client.clientID, scope: client.scope, sessions: requests), directory: workDirectory)
        result.mintSeconds = lap(&clock)

        let directory = workDirectory + "/refresh"
        progress.say("refresh-capacity: writing \(count) OAuth accounts into a fresh store")
        try await OAuthFakeAccounts.seed(stateDirectory: directory + "/state", sessions: sessions, keys: keys,
                                   issuer: upstream.info.oauthIssuer, pdsURL: upstream.info.pdsURL) {
            $0.accessExpiresAt.addingTimeInterval(-Self.seededTokenAge)
        }
        result.seedSeconds = lap(&clock)

        progress.say("refresh-capacity: starting blueskyd with \(count) OAuth accounts (default refresh limits)")
        let daemon: DaemonProcess
        do {
            daemon = try await DaemonProcess(directory: directory, testbed: nil,
                                             extraArguments: DaemonArguments.forUpstream(upstream.info))
        } catch {
            throw BenchError.daemonFailed(describe(error))
        }
        try await daemon.runThenStop {
            let readyAt = Date()
            result.startSeconds = lap(&clock)
            result.daemonStartCPUSeconds = ProcessCPU.read(pid: daemon.pid)?.seconds
            result.leadSeconds = sessions.map(\.accessExpiresAt).min()?.timeIntervalSince(readyAt)
            try await watchRefreshes(daemon: daemon, upstream: upstream, dids: Set(sessions.map(\.did)), readyAt: readyAt,
                                     windowEnd: windowStart.addingTimeInterval(window), into: &result)
        }
    }

    /// Watches blueskyd until every account was refreshed (or the last token's expiry is well
    /// past), then reads the testbed's records.
    private func watchRefreshes(daemon: DaemonProcess, upstream: StartedUpstream, dids: Set<String>, readyAt: Date,
                                windowEnd: Date, into result: inout RefreshCapacityResult) async throws {
        let count = options.refreshAccounts
        let status = try await daemon.call("daemon.status")
        result.accountsLoaded = status["accounts"]?.intValue
        let daemonWatch = ProcessWatch(pid: daemon.pid)
        let upstreamWatch = upstream.pid.map(ProcessWatch.init(pid:))
        daemonWatch.sample()
        upstreamWatch?.sample()
        let giveUpAt = windowEnd.addingTimeInterval(90)
        var lastReport = Date()
        progress.say("refresh-capacity: waiting for the refreshes (tokens expire from \(format(result.leadSeconds ?? 0, 0)) s "
            + "to \(format(windowEnd.timeIntervalSince(readyAt), 0)) s from now)")
        while true {
            try await Task.sleep(for: .seconds(Self.pollSeconds))
            let sample = daemonWatch.sample()
            upstreamWatch?.sample()
            let done = try await upstream.control.refreshProgress()
            if Date().timeIntervalSince(lastReport) >= 30 {
                lastReport = Date()
                progress.say("refresh-capacity: \(done.refreshedAccounts)/\(count) accounts refreshed, \(done.lapsed) lapsed; "
                    + "blueskyd CPU \(format(sample.cpuSeconds ?? 0, 1)) s, RSS \(sample.rssKiB.map(mebibytes) ?? "?")")
            }
            guard daemon.isRunning else { throw BenchError.daemonFailed("blueskyd exited during the refreshes") }
            if done.refreshedAccounts >= count || Date() > giveUpAt { break }
        }
        let final = try await daemon.call("daemon.status")
        for state in ["active", "retrying", "needsLogin"] { result.finalStates[state] = final[state]?.intValue }
        result.daemonRSSPeakKiB = ProcessMemory.read(pid: daemon.pid)?.peakKiB
        let margins = try await upstream.control.refreshMargins(directory: workDirectory)
        result.totals = try await upstream.control.oauthTotals()
        // An account never refreshed appears in no margin: counted against the minted DIDs.
        result.summarize(margins: margins, dids: dids, daemonReadyAt: readyAt)
        result.summarize(daemon: daemonWatch.samples, upstream: upstreamWatch?.samples ?? [])
        progress.say("refresh-capacity: \(result.refreshedAccounts)/\(count) refreshed, \(result.lapsed) lapsed, "
            + "margin min \(result.margin.map { format($0.min, 1) } ?? "?") s")
    }
}
