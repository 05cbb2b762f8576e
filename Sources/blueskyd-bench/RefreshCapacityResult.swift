import ATTestbed
import Foundation

/// The refresh-capacity section: many OAuth accounts whose access tokens expire within one
/// window, refreshed by blueskyd through a slow token endpoint.
struct RefreshCapacityResult: Codable, Sendable {
    // What was asked for.
    /// The section's own testbed.
    var upstream: String?
    var accounts: Int
    var windowSeconds: Double
    var tokenEndpointLatencyMilliseconds: Int
    /// The life of the access tokens the refreshes hand out.
    var refreshedTokenLifetimeSeconds: Int
    /// Generating the DPoP keys, minting the sessions at the testbed, writing the store.
    var keySeconds: Double?
    var mintSeconds: Double?
    var seedSeconds: Double?
    /// From launching blueskyd to its socket answering; `daemon.status` accounts after that.
    var startSeconds: Double?
    var accountsLoaded: Int?
    /// From blueskyd answering to the earliest access token expiry (the window's start).
    var leadSeconds: Double?

    // What happened, as the testbed's authorization server saw it.
    /// Refresh grants that rotated tokens (one per account is expected).
    var refreshes = 0
    var refreshedAccounts = 0
    /// Accounts never refreshed by the end of the run (their tokens lapsed unless the run was cut short).
    var notRefreshed = 0
    /// Refreshes after the previous access token had expired.
    var lapsed = 0
    /// From blueskyd answering to the first refresh, and from the first to the last one.
    var firstRefreshAfterStartSeconds: Double?
    var refreshSpanSeconds: Double?
    /// Refreshes over the span, per second; and the busiest 60 s (sliding), per second.
    var overallPerSecond: Double?
    var peakMinutePerSecond: Double?
    /// Refreshes in each minute from the first refresh on.
    var perMinute: [Int] = []
    /// Previous access token expiry minus refresh time, seconds.
    var margin: MarginSummary?
    var totals: OAuthTotals?
    /// `daemon.status` at the end: active, retrying, needs-login.
    var finalStates: [String: Int] = [:]

    // What it cost blueskyd (and the testbed, for scale).
    /// CPU seconds from launch to the socket answering (loading the store), and from then to the end.
    var daemonStartCPUSeconds: Double?
    var daemonRunCPUSeconds: Double?
    /// blueskyd's CPU over the run, and over its busiest 60 s (from samples every few
    /// seconds), in percent of one core.
    var daemonAverageCPUPercent: Double?
    var daemonPeakCPUPercent: Double?
    var daemonRSSAtStartKiB: Int?
    var daemonRSSAtEndKiB: Int?
    var daemonRSSPeakKiB: Int?
    var upstreamRunCPUSeconds: Double?
    var samples: [ProcessSample] = []
    var error: String?

    var cpuMillisecondsPerRefresh: Double? {
        guard let cpu = daemonRunCPUSeconds, refreshes > 0 else { return nil }
        return cpu * 1000 / Double(refreshes)
    }
}

/// Order statistics of refresh margins, seconds.
struct MarginSummary: Codable, Sendable {
    var min: Double
    var p1: Double
    var p50: Double
    var max: Double

    init?(_ seconds: [Double]) {
        guard let min = seconds.min(), let max = seconds.max(), let p1 = Statistics.quantile(seconds, 0.01),
              let p50 = Statistics.quantile(seconds, 0.5) else { return nil }
        self.min = min
        self.p1 = p1
        self.p50 = p50
        self.max = max
    }
}

extension RefreshCapacityResult {
    /// Fills in the refresh figures from the testbed's margin log, for the accounts in `dids`.
    mutating func summarize(margins all: [OAuthRefreshMargin], dids: Set<String>, daemonReadyAt: Date) {
        let margins = all.filter { dids.contains($0.did) }.sorted { $0.refreshedAt < $1.refreshedAt }
        refreshes = margins.count
        refreshedAccounts = Set(margins.map(\.did)).count
        notRefreshed = dids.count - refreshedAccounts
        lapsed = margins.count { $0.lapsed }
        margin = MarginSummary(margins.map(\.seconds))
        guard let first = margins.first?.refreshedAt, let last = margins.last?.refreshedAt else { return }
        firstRefreshAfterStartSeconds = first.timeIntervalSince(daemonReadyAt)
        let span = last.timeIntervalSince(first)
        refreshSpanSeconds = span
        overallPerSecond = span > 0 ? Double(margins.count) / span : nil
        // Over a shorter span, the busiest minute would just be the whole run divided by 60.
        if span >= 60 { peakMinutePerSecond = Double(Self.busiestWindow(margins.map(\.refreshedAt), seconds: 60)) / 60 }
        perMinute = Array(repeating: 0, count: Int(span / 60) + 1)
        for entry in margins { perMinute[Int(entry.refreshedAt.timeIntervalSince(first) / 60)] += 1 }
    }

    /// The most events within any `seconds`-long window (times sorted).
    static func busiestWindow(_ times: [Date], seconds: Double) -> Int {
        var best = 0
        var start = 0
        for end in times.indices {
            while times[end].timeIntervalSince(times[start]) >= seconds { start += 1 }
            best = Swift.max(best, end - start + 1)
        }
        return best
    }

    /// Fills in the daemon's CPU and memory from its samples (the first taken when it answered).
    mutating func summarize(daemon: [ProcessSample], upstream: [ProcessSample]) {
        samples = daemon
        let cpu = daemon.compactMap { sample in sample.cpuSeconds.map { (at: sample.at, seconds: $0) } }
        if let first = cpu.first, let last = cpu.last {
            daemonRunCPUSeconds = last.seconds - first.seconds
            if last.at > first.at { daemonAverageCPUPercent = (last.seconds - first.seconds) / (last.at - first.at) * 100 }
            var peak: Double?
            var start = 0
            for end in cpu.indices {
                // The shortest window of at least 60 s that ends at this sample.
                while start + 1 < end, cpu[end].at - cpu[start + 1].at >= 60 { start += 1 }
                let elapsed = cpu[end].at - cpu[start].at
                guard elapsed >= 60 else { continue }
                peak = Swift.max(peak ?? 0, (cpu[end].seconds - cpu[start].seconds) / elapsed * 100)
            }
            daemonPeakCPUPercent = peak
        }
        daemonRSSAtStartKiB = daemon.first?.rssKiB
        daemonRSSAtEndKiB = daemon.last(where: { $0.rssKiB != nil })?.rssKiB
        let upstreamCPU = upstream.compactMap(\.cpuSeconds)
        if let first = upstreamCPU.first, let last = upstreamCPU.last { upstreamRunCPUSeconds = last - first }
    }
}
