import Foundation

/// Everything one run measured; printed as text or JSON.
struct BenchReport: Codable, Sendable {
    var machine: MachineInfo
    /// Where the upstream PDS ran and what it is.
    var upstream: String
    /// The blueskyd executable measured.
    var daemonBinary: String
    /// The sections asked for (the text report leaves the others out).
    var sections: [String] = []
    var throughput: ThroughputResult?
    var latency: LatencyResult?
    /// Section 11: a 100 MB upload through the XRPC gateway.
    var gatewayUpload: GatewayUploadResult?
    var memory: [MemoryResult] = []
    var dpop: DPoPResult?
    /// Sections 5 and 6: sections 1 and 2 for an OAuth (DPoP-bound) session, same targets.
    var oauthThroughput: ThroughputResult?
    var oauthLatency: LatencyResult?
    var oauth2Throughput: ThroughputResult?
    var oauth2Latency: LatencyResult?
    /// Section 7: one entry per nonce rotation period tried.
    var nonceChallenges: [NonceChallengeResult] = []
    /// Section 8: many OAuth accounts falling due within one window.
    var refreshCapacity: RefreshCapacityResult?
    /// Section 9: what 100 event subscribers cost.
    var events: EventsResult?
    /// Section 10: three hosts on one PostgreSQL database.
    var cluster: ClusterResult?
    /// Section 14: 100,000 accounts copied, exported and imported.
    var registry: RegistryResult?
    /// Section 16: a one-shot call, bskyctl against an SDK script.
    var oneShot: OneShotResult?
    /// Section 15: the binaries' sizes, built and stripped.
    var footprint: [BinaryFootprint] = []
    /// Sections that failed or were skipped, one line each.
    var problems: [String] = []
}

struct ThroughputResult: Codable, Sendable {
    static let targetRatio = 0.75

    var nsid: String
    var connections: Int
    /// Requests in flight per connection (1: each connection sends its next request on the reply).
    var inFlightPerConnection: Int
    var roundSeconds: Double
    /// Calls per second of each round, in the order run (rounds alternate direct, daemon).
    var directRounds: [Double]
    var daemonRounds: [Double]
    var directMedian: Double
    var daemonMedian: Double
    /// daemonMedian / directMedian.
    var ratio: Double
    var directFailures: Int
    var daemonFailures: Int
    var firstError: String?
    /// The daemon's resident memory right after the load (KiB).
    var daemonRSSAfterLoadKiB: Int?
    /// The same calls through the XRPC gateway, when measured.
    var gateway: GatewayThroughput?

    var meetsTarget: Bool { ratio >= Self.targetRatio }
}

/// Throughput through the XRPC gateway, beside the direct and JSON-RPC sides of the same run.
struct GatewayThroughput: Codable, Sendable {
    var rounds: [Double]
    var median: Double
    /// median / the median of its own direct rounds.
    var ratio: Double
    var failures: Int
    /// The direct rounds these took turns with (a pass of their own).
    var directRounds: [Double] = []

    var meetsTarget: Bool { ratio >= ThroughputResult.targetRatio }
}

/// p50/p90/p99 of sequential call durations, in microseconds.
struct LatencySummary: Codable, Sendable {
    var p50: Double
    var p90: Double
    var p99: Double
    var mean: Double
    var min: Double

    init?(_ samples: [Double]) {
        guard let p50 = Statistics.quantile(samples, 0.5), let p90 = Statistics.quantile(samples, 0.9),
              let p99 = Statistics.quantile(samples, 0.99), let min = samples.min() else { return nil }
        self.p50 = p50
        self.p90 = p90
        self.p99 = p99
        self.mean = samples.reduce(0, +) / Double(samples.count)
        self.min = min
    }
}

struct LatencyResult: Codable, Sendable {
    static let appPasswordTarget = 100.0
    static let oauthTarget = 150.0

    var nsid: String
    var samplesPerSide: Int
    var blockSize: Int
    var direct: LatencySummary
    var daemon: LatencySummary
    /// daemon.p50 − direct.p50, microseconds.
    var addedP50: Double
    /// daemon.p99 − direct.p99, microseconds.
    var addedP99: Double
    var failures: Int
    /// The most blueskyd may add at p50, microseconds.
    var targetAddedP50: Double
    /// The same calls through the XRPC gateway, when measured.
    var gateway: LatencySummary?
    /// The direct calls the gateway's blocks took turns with (a pass of their own).
    var gatewayDirect: LatencySummary?
    var gatewayAddedP50: Double?
    var gatewayAddedP99: Double?
    /// CPU and context switches per call, side by side (none in reports from before they were measured).
    var cost: CallCosts?

    var gatewayMeetsTarget: Bool? { gatewayAddedP50.map { $0 <= targetAddedP50 } }

    var meetsTarget: Bool { addedP50 <= targetAddedP50 }
}

/// PDS nonce challenges over a fixed number of proxied OAuth calls.
struct NonceChallengeResult: Codable, Sendable {
    /// How often the testbed's DPoP nonces rotated, seconds.
    var rotationSeconds: Int
    /// Which testbed and daemon the calls went through.
    var setup: String
    var connections: Int
    /// Calls made through blueskyd (failed ones included).
    var calls: Int
    var failed: Int
    var firstError: String?
    /// From the first call sent to the last reply.
    var wallSeconds: Double
    /// Rotation boundaries crossed during the calls (the testbed's clock is the wall clock).
    var rotationsDuringRun: Int
    /// The testbed's counters over the calls: `pdsNonceChallenges` is the figure; refreshes,
    /// `invalid_token` and other DPoP rejections should stay at zero, and each call should be
    /// authenticated once.
    var during: OAuthCounters
    var challengesPer10000Calls: Double
    /// Challenges met by the daemon's very first proxied call of that session (it holds no PDS
    /// nonce yet), counted separately before the run.
    var firstCallChallenges: Int?
    /// After the run, no call for this long (over two periods: the daemon's nonce is then
    /// no longer accepted), then one call: the challenges it met. Only for short periods.
    var idleSeconds: Double?
    var afterIdleChallenges: Int?
}

struct MemoryResult: Codable, Sendable {
    /// 40 MB (10^6 bytes) in KiB.
    static let targetKiBAtThousand = 40_000_000 / 1024
    /// 80 MiB in KiB, and the start, at 100,000 accounts (issue 28; 120 MiB and 1 s before).
    static let targetKiBAtHundredThousand = 80 * 1024
    static let targetStartAtHundredThousand = 0.5
    /// 512 MiB and 5 s at 1,000,000 accounts (issue 28).
    static let targetKiBAtMillion = 512 * 1024
    static let targetStartAtMillion = 5.0

    var accounts: Int
    /// Seconds spent writing the accounts into the store (before the daemon starts).
    var seedSeconds: Double?
    /// From launching blueskyd to its socket answering `daemon.info` (median of the starts).
    var startSeconds: Double?
    /// The daemon's CPU time (user + system, every thread) from launch to its first answer.
    var startCPUSeconds: Double?
    /// `daemon.status` `accounts` after startup (should equal `accounts`).
    var accountsLoaded: Int?
    /// The median of `rssSamplesKiB`.
    var rssKiB: Int?
    /// VmRSS of each start, in order.
    var rssSamplesKiB: [Int] = []
    var peakKiB: Int?
    var error: String?
    /// The same for the baseline build (`--baseline-bin-dir`), started in turn with this one.
    var baseline: MemorySide?
}

/// One build's medians in the memory section.
struct MemorySide: Codable, Sendable {
    var rssKiB: Int?
    var rssSamplesKiB: [Int]
    var peakKiB: Int?
    var startSeconds: Double?
    var startCPUSeconds: Double?
}

extension BenchReport {
    func jsonText() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}
