import ArgumentParser
import Foundation

/// `blueskyd-bench`: measures blueskyd against a local testbed PDS and prints a report.
/// It is a measurement, not a test: it never fails on a missed target, only on a broken setup.
@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "blueskyd-bench",
        abstract: "Measures blueskyd: proxy throughput and added latency against a local PDS (app-password and OAuth), DPoP nonce challenges, idle memory, the cost of a DPoP proof, refresh capacity; and a soak.",
        discussion: """
            Run it with `make bench`: it needs the hermetic test network (scripts/hermetic-run), where the \
            testbed binds 127.0.0.N:443 as tbN.test, and a release build of blueskyd in $BLUESKYD_BIN_DIR \
            (or next to this executable). See docs/PERFORMANCE.md.
            """,
        subcommands: [RunBenchmark.self, SoakCommand.self, UpstreamCommand.self],
        defaultSubcommand: RunBenchmark.self)
}

/// The benchmark itself (the default subcommand).
struct RunBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run", abstract: "Runs every section and prints the report (the default).")

    @Flag(help: "Print the report as one JSON object instead of text.") var json = false
    @Option(help: "Concurrent connections (and requests in flight) for the throughput section.")
    var connections = 32
    @Option(help: "Rounds per side for the throughput section (alternating direct/daemon).") var rounds = 5
    @Option(help: "Seconds per throughput round.") var roundSeconds = 3.0
    @Option(help: "Seconds of warm-up per side before the throughput rounds.") var warmupSeconds = 2.0
    @Option(help: "Sequential samples per side for the latency section (runs of 2,000 varied by ±25 µs at p50; 10,000 hold steadier).") var latencySamples = 10_000
    @Option(help: "Samples per block: the latency section alternates blocks of direct and daemon calls.")
    var latencyBlock = 100
    @Option(help: "Sequential calls per side over which the latency sections count CPU time and context switches.")
    var costCalls = 5_000
    @Option(help: "Registered account counts for the memory section, comma-separated.")
    var accountCounts = "1,1000,100000,1000000"
    @Option(help: "Seconds the daemon idles before its RSS is read.") var settleSeconds = 2.0
    @Option(help: "Starts of blueskyd per account count in the memory section; the median is reported (RSS varies by a few MiB between starts).")
    var memoryStarts = 3
    @Option(help: "A directory holding another build's blueskyd (an earlier commit's): the memory section starts it and this build's in turn on the same store, in ABBA order, and reports both.")
    var baselineBinDir: String?
    @Option(help: ArgumentHelp("Sections to run, comma-separated: \(BenchRun.sectionOrder.joined(separator: ", ")).",
                               valueName: "sections"))
    var sections = BenchRun.sectionOrder.joined(separator: ",")
    @Option(help: "Proxied OAuth calls per run of the oauth-nonces section.") var nonceCalls = 10_000
    @Option(help: "Seconds between DPoP nonce rotations at the benchmark's testbed (the reference server: 60).")
    var nonceRotationSeconds = 60
    @Option(help: "A second oauth-nonces run against a testbed rotating its nonces this often, in seconds (0: none).")
    var shortNonceRotationSeconds = 1
    @Option(help: "OAuth accounts of the refresh-capacity section.") var refreshAccounts = 100_000
    @Option(help: "Minutes over which their access tokens expire (refresh-capacity).") var refreshWindowMinutes = 15.0
    @Option(help: "Minutes from blueskyd's start to the first expiry, roughly (refresh-capacity; blueskyd refreshes up to 6 min ahead).")
    var refreshLeadMinutes = 7.0
    @Option(help: "Milliseconds the testbed's token endpoint takes to answer a refresh (refresh-capacity).")
    var refreshLatencyMs = 100
    @Option(help: "Minutes the access tokens handed out by refreshes live (refresh-capacity: longer than the run).")
    var refreshedTokenLifetimeMinutes = 120
    @Option(help: "Accounts in the cluster section's PostgreSQL database (all three hosts load them all).")
    var clusterAccounts = 1_000_000
    @Option(help: "Accounts the registry section copies, exports and imports.")
    var registryAccounts = 100_000
    @Option(help: "Of those, OAuth accounts that fall due at once in the cluster section's storm (a quarter more for the failover storm).")
    var stormAccounts = 20_000
    @Option(help: "Refreshes each cluster host sends one server at once (blueskyd's max_concurrent_refreshes_per_host, whose default is 16): the storm's bound is 3 hosts × this / the token endpoint's latency.")
    var stormRefreshesPerServer = 16
    @Flag(help: "Run the testbed PDS inside this process instead of a child process.")
    var inProcessUpstream = false
    @Option(help: "Seconds after which the whole run gives up (children are killed); default 600, plus the lengths of the refresh-capacity and cluster sections and of the memory section's repeated starts when they run.")
    var timeLimit: Double?

    func run() async throws {
        // A request to an upstream child that died must fail, not kill the benchmark.
        signal(SIGPIPE, SIG_IGN)
        var options = BenchOptions(
            connections: max(1, connections), rounds: max(1, rounds), roundSeconds: max(0.2, roundSeconds),
            warmupSeconds: max(0, warmupSeconds), latencySamples: max(10, latencySamples),
            latencyBlock: max(1, latencyBlock),
            accountCounts: accountCounts.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) },
            settleSeconds: max(0, settleSeconds),
            memoryStarts: max(1, memoryStarts),
            sections: Set(sections.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }),
            inProcessUpstream: inProcessUpstream, nonceCalls: max(1, nonceCalls),
            nonceRotationSeconds: max(1, nonceRotationSeconds), shortNonceRotationSeconds: max(0, shortNonceRotationSeconds))
        options.costCalls = max(100, costCalls)
        options.baselineBinDir = baselineBinDir
        options.refreshAccounts = max(1, refreshAccounts)
        options.refreshWindowMinutes = max(0.1, refreshWindowMinutes)
        options.refreshLeadMinutes = max(0, refreshLeadMinutes)
        options.refreshLatencyMilliseconds = max(0, refreshLatencyMs)
        options.refreshedTokenLifetimeMinutes = max(1, refreshedTokenLifetimeMinutes)
        options.clusterAccounts = max(1, clusterAccounts)
        options.registryAccounts = max(1, registryAccounts)
        options.stormAccounts = max(10, stormAccounts)
        options.stormRefreshesPerServer = max(1, stormRefreshesPerServer)
        let extra = (options.wants(RefreshCapacityBench.section) ? RefreshCapacityBench.timeBudget(options) : 0)
            + (options.wants(ClusterBench.section) ? ClusterBench.timeBudget(options) : 0)
            + (options.wants(RegistryBench.section) ? RegistryBench.timeBudget(options) : 0)
            + (options.wants("memory") ? MemoryBench.timeBudget(options) : 0)
        Watchdog.arm(seconds: timeLimit ?? 600 + extra)
        let progress = ProgressLog(enabled: true)
        let report = await BenchRun(options: options, progress: progress).run()
        if json {
            print(report.jsonText())
        } else {
            print(report.text())
        }
        Watchdog.disarm()
    }
}

/// The knobs of one run, after validation.
struct BenchOptions: Sendable {
    var connections: Int
    var rounds: Int
    var roundSeconds: Double
    var warmupSeconds: Double
    var latencySamples: Int
    var latencyBlock: Int
    var accountCounts: [Int]
    var settleSeconds: Double
    var memoryStarts: Int
    /// Another build's blueskyd directory, started beside this build's in the memory section.
    var baselineBinDir: String?
    var sections: Set<String>
    var inProcessUpstream: Bool
    var nonceCalls: Int
    var nonceRotationSeconds: Int
    var shortNonceRotationSeconds: Int
    var costCalls = 5_000
    var refreshAccounts = 100_000
    var refreshWindowMinutes = 15.0
    var refreshLeadMinutes = 7.0
    var refreshLatencyMilliseconds = 100
    var refreshedTokenLifetimeMinutes = 120
    var registryAccounts = 100_000
    var clusterAccounts = 1_000_000
    var stormAccounts = 20_000
    var stormRefreshesPerServer = 16

    func wants(_ section: String) -> Bool { sections.contains(section) }
}

/// Progress lines go to standard error so `--json` output stays clean.
struct ProgressLog: Sendable {
    let enabled: Bool
    func say(_ line: String) {
        guard enabled else { return }
        FileHandle.standardError.write(Data("[bench] \(line)\n".utf8))
    }
}
