import Foundation

/// Everything one soak measured; printed as text or JSON.
struct SoakReport: Codable, Sendable {
    static let targetRSSGrowth = 0.05

    var machine: MachineInfo
    var upstream = "not started"
    var daemonBinary: String
    var minutes: Double
    var callsPerSecond: Double
    var connections: Int
    var tokenLifetimeSeconds: Int
    var refreshLatencyMilliseconds: Int
    var appPasswordAccounts: Int
    var oauthAccounts: Int

    var calls = SoakTally.Snapshot()
    /// Wall time of the load, from its first call to the end of the drain.
    var loadSeconds: Double?
    var latencyP50Milliseconds: Double?
    var latencyP99Milliseconds: Double?
    var latencyMaxMilliseconds: Double?

    /// blueskyd's samples, one a minute from the start of the load (at 0 s) to its end.
    var samples: [ProcessSample] = []
    var daemonCPUSeconds: Double?
    /// The testbed's view over the soak, summed over the soak's accounts.
    var appPasswordRefreshes = 0
    var appPasswordRefreshTokenReuses = 0
    var appPasswordRejectedRefreshes = 0
    var appPasswordExpiredTokenRejections = 0
    /// `oauthTotals.refreshes` and `.invalidTokenRejections`, kept beside the app-password figures.
    var oauthRefreshes = 0
    var oauthInvalidTokenRejections = 0
    var oauthTotals: OAuthTotals?
    /// `daemon.status` at the end: active, retrying, needs-login.
    var finalStates: [String: Int] = [:]
    var problems: [String] = []

    var rssAtStartKiB: Int? { samples.first?.rssKiB }
    /// After the first minute of load: pools, caches and buffers have grown to their working size.
    var rssAfterFirstMinuteKiB: Int? { samples.count > 1 ? samples[1].rssKiB : nil }
    var rssAtEndKiB: Int? { samples.last?.rssKiB }
    var rssMaxKiB: Int? { samples.compactMap(\.rssKiB).max() }

    /// End over start (and over the first minute's end), 1.0 being flat.
    var rssRatio: Double? { ratio(rssAtEndKiB, rssAtStartKiB) }
    var rssRatioAfterFirstMinute: Double? { ratio(rssAtEndKiB, rssAfterFirstMinuteKiB) }

    private func ratio(_ end: Int?, _ start: Int?) -> Double? {
        guard let end, let start, start > 0 else { return nil }
        return Double(end) / Double(start)
    }
}

extension SoakReport {
    func jsonText() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        var trimmed = self
        // 90,000 latencies are summarised above; the JSON keeps the figures, not the samples.
        trimmed.calls.latenciesMilliseconds = []
        return (try? encoder.encode(trimmed)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    func text() -> String {
        var lines = [
            "blueskyd soak — \(machine.date)",
            "machine:  \(machine.processors) CPUs, \(machine.cpuModel), \(machine.memoryTotal) RAM, Linux \(machine.kernel)",
            "upstream: \(upstream)",
            "daemon:   \(daemonBinary)",
            "",
            "\(format(minutes, 1)) min of app.bsky.actor.getProfile through blueskyd at \(format(callsPerSecond, 0)) calls/s "
                + "over \(connections) connections, \(appPasswordAccounts) app-password and \(oauthAccounts) OAuth accounts, "
                + "access tokens living \(tokenLifetimeSeconds) s, refreshes answered after \(refreshLatencyMilliseconds) ms",
            "   calls: \(calls.sent) sent, \(calls.succeeded) succeeded, \(calls.failedByRefresh) failed because of refreshing, "
                + "\(calls.failedOtherwise) failed otherwise, \(calls.skippedBacklog) skipped (backlog)"
                + (calls.sent - calls.completed - calls.skippedBacklog > 0
                    ? ", \(calls.sent - calls.completed - calls.skippedBacklog) unanswered" : ""),
            "   failed because of refreshing: \(calls.failedByRefresh)   target 0   " + (calls.failedByRefresh == 0 ? "MET" : "MISSED"),
        ]
        for (reason, count) in calls.reasons.sorted(by: { $0.value > $1.value }) {
            lines.append("      \(count) × \(reason)")
        }
        if let p50 = latencyP50Milliseconds, let p99 = latencyP99Milliseconds, let max = latencyMaxMilliseconds {
            lines.append("   call latency: p50 \(format(p50, 2)) ms, p99 \(format(p99, 2)) ms, max \(format(max, 1)) ms")
        }
        lines.append("   refreshes at the testbed: app password \(appPasswordRefreshes) (grace-period reuses "
            + "\(appPasswordRefreshTokenReuses), refused \(appPasswordRejectedRefreshes)), OAuth \(oauthRefreshes) "
            + "(replays \(oauthTotals?.refreshTokenReplays ?? 0), invalid grants \(oauthTotals?.invalidGrants ?? 0), "
            + "lapsed \(oauthTotals?.refreshesAfterAccessExpiry ?? 0))")
        lines.append("   stale tokens refused by the PDS: ExpiredToken \(appPasswordExpiredTokenRejections), "
            + "invalid_token \(oauthInvalidTokenRejections)")
        lines.append("   blueskyd at the end: " + ["active", "retrying", "needsLogin"]
            .map { "\($0) \(finalStates[$0].map(String.init) ?? "?")" }.joined(separator: ", ")
            + (daemonCPUSeconds.map { "; CPU \(format($0, 1)) s over the load" } ?? ""))
        lines.append("   RSS: \(rssAtStartKiB.map(mebibytes) ?? "?") at the start of the load, "
            + "\(rssAfterFirstMinuteKiB.map(mebibytes) ?? "?") after its first minute, \(rssAtEndKiB.map(mebibytes) ?? "?") at the end "
            + "(max \(rssMaxKiB.map(mebibytes) ?? "?")); end/start \(rssRatio.map { format($0, 3) } ?? "?"), "
            + "end/first minute \(rssRatioAfterFirstMinute.map { format($0, 3) } ?? "?")   target within "
            + "\(format(Self.targetRSSGrowth * 100, 0)) %   "
            + (rssRatio.map { abs($0 - 1) <= Self.targetRSSGrowth ? "MET" : "MISSED" } ?? "?"))
        lines.append("   RSS each minute (MiB): " + samples.map { $0.rssKiB.map { format(Double($0) / 1024, 1) } ?? "?" }
            .joined(separator: " "))
        if !problems.isEmpty {
            lines.append("")
            lines.append("Problems:")
            lines += problems.map { "  - \($0)" }
        }
        return lines.joined(separator: "\n")
    }
}
