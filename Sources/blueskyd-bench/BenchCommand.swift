import ArgumentParser
import Foundation

/// `blueskyd-bench`: measures blueskyd against a local testbed PDS and prints a report.
/// It is a measurement, not a test: it never fails on a missed target, only on a broken setup.
@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "blueskyd-bench",
        abstract: "Measures blueskyd: proxy throughput and added latency against a local PDS (app-password and OAuth), DPoP nonce challenges, idle memory, the cost of a DPoP proof.",
        discussion: """
            Run it with `make bench`: it needs the hermetic test network (scripts/hermetic-run), where the \
            testbed binds 127.0.0.N:443 as tbN.test, and a release build of blueskyd in $BLUESKYD_BIN_DIR \
            (or next to this executable). See docs/PERFORMANCE.md.
            """,
        subcommands: [RunBenchmark.self, UpstreamCommand.self],
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
    @Option(help: "Sequential samples per side for the latency section.") var latencySamples = 2000
    @Option(help: "Samples per block: the latency section alternates blocks of direct and daemon calls.")
    var latencyBlock = 100
    @Option(help: "Registered account counts for the memory section, comma-separated.")
    var accountCounts = "1,1000,100000"
    @Option(help: "Seconds the daemon idles before its RSS is read.") var settleSeconds = 2.0
    @Option(help: "Sections to run, comma-separated: throughput, latency, oauth-throughput, oauth-latency, oauth-nonces, memory, dpop.")
    var sections = "throughput,latency,oauth-throughput,oauth-latency,oauth-nonces,memory,dpop"
    @Option(help: "Proxied OAuth calls per run of the oauth-nonces section.") var nonceCalls = 10_000
    @Option(help: "Seconds between DPoP nonce rotations at the benchmark's testbed (the reference server: 60).")
    var nonceRotationSeconds = 60
    @Option(help: "A second oauth-nonces run against a testbed rotating its nonces this often, in seconds (0: none).")
    var shortNonceRotationSeconds = 1
    @Flag(help: "Run the testbed PDS inside this process instead of a child process.")
    var inProcessUpstream = false
    @Option(help: "Seconds after which the whole run gives up (children are killed).") var timeLimit = 600.0

    func run() async throws {
        Watchdog.arm(seconds: timeLimit)
        // A request to an upstream child that died must fail, not kill the benchmark.
        signal(SIGPIPE, SIG_IGN)
        let options = BenchOptions(
            connections: max(1, connections), rounds: max(1, rounds), roundSeconds: max(0.2, roundSeconds),
            warmupSeconds: max(0, warmupSeconds), latencySamples: max(10, latencySamples),
            latencyBlock: max(1, latencyBlock),
            accountCounts: accountCounts.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) },
            settleSeconds: max(0, settleSeconds),
            sections: Set(sections.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }),
            inProcessUpstream: inProcessUpstream, nonceCalls: max(1, nonceCalls),
            nonceRotationSeconds: max(1, nonceRotationSeconds), shortNonceRotationSeconds: max(0, shortNonceRotationSeconds))
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
    var sections: Set<String>
    var inProcessUpstream: Bool
    var nonceCalls: Int
    var nonceRotationSeconds: Int
    var shortNonceRotationSeconds: Int

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
