import Foundation

/// The refresh-capacity section of the text report.
extension RefreshCapacityResult {
    func lines() -> [String] {
        var lines = ["8. Refresh capacity: \(accounts) OAuth accounts whose access tokens expire within "
            + "\(format(windowSeconds / 60, 1)) min, token endpoint answering after \(tokenEndpointLatencyMilliseconds) ms,"
            + " blueskyd on its default limits (64 refreshes at once, 16 per server)"]
        if let upstream { lines.append("   testbed: \(upstream)") }
        if let error, refreshes == 0 {
            lines.append("   failed: \(error)")
            return lines
        }
        lines.append("   setup: keys \(seconds(keySeconds)), minting \(seconds(mintSeconds)), store \(seconds(seedSeconds)), "
            + "blueskyd start \(seconds(startSeconds)) (\(accountsLoaded.map(String.init) ?? "?") accounts loaded), "
            + "first expiry \(seconds(leadSeconds)) after it answered")
        lines.append("   refreshed: \(refreshedAccounts)/\(accounts) accounts (\(refreshes) refreshes), not refreshed: \(notRefreshed), "
            + "lapsed: \(lapsed)   target 0 lapsed   " + (lapsed == 0 && notRefreshed == 0 ? "MET" : "MISSED"))
        if let overallPerSecond, let span = refreshSpanSeconds {
            lines.append("   rate: \(format(overallPerSecond, 1))/s over \(format(span, 0)) s"
                + (peakMinutePerSecond.map { ", busiest minute \(format($0, 1))/s" } ?? "")
                + "; first refresh \(seconds(firstRefreshAfterStartSeconds)) after start")
        }
        if let margin {
            lines.append("   margin before expiry: min \(format(margin.min, 1)) s, p1 \(format(margin.p1, 1)) s, "
                + "p50 \(format(margin.p50, 1)) s, max \(format(margin.max, 1)) s")
        }
        if let totals {
            lines.append("   at the authorization server: replays \(totals.refreshTokenReplays), invalid grants \(totals.invalidGrants), "
                + "client failures \(totals.clientAuthenticationFailures), refused proofs \(totals.dpopRejections), "
                + "nonce challenges \(totals.authorizationServerNonceChallenges)")
        }
        lines.append("   blueskyd at the end: " + ["active", "retrying", "needsLogin"]
            .map { "\($0) \(finalStates[$0].map(String.init) ?? "?")" }.joined(separator: ", "))
        lines.append("   blueskyd CPU: \(seconds(daemonRunCPUSeconds)) over the run"
            + (daemonAverageCPUPercent.map { " (\(format($0, 1)) % of a core on average" } ?? " (")
            + (daemonPeakCPUPercent.map { ", \(format($0, 1)) % in the busiest minute)" } ?? ")")
            + (cpuMillisecondsPerRefresh.map { ", \(format($0, 2)) ms per refresh" } ?? "")
            + "; \(seconds(daemonStartCPUSeconds)) to start")
        lines.append("   blueskyd RSS: \(daemonRSSAtStartKiB.map(mebibytes) ?? "?") at start, "
            + "\(daemonRSSAtEndKiB.map(mebibytes) ?? "?") at the end, peak \(daemonRSSPeakKiB.map(mebibytes) ?? "?")"
            + (upstreamRunCPUSeconds.map { "; the testbed used \(format($0, 1)) s of CPU" } ?? ""))
        if !perMinute.isEmpty {
            lines.append("   refreshes per minute: " + perMinute.map(String.init).joined(separator: " "))
        }
        if let error { lines.append("   error: \(error)") }
        return lines
    }

    private func seconds(_ value: Double?) -> String {
        value.map { format($0, 1) + " s" } ?? "?"
    }
}
