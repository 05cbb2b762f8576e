import ArgumentParser
import DaemonHarness
import Foundation

/// `blueskyd-bench soak`: proxied calls at a steady rate for a long time, with access tokens
/// so short-lived that every account is refreshed every minute, app passwords and OAuth alike.
/// It counts every call's outcome (a failure a refresh explains is the figure that must stay 0)
/// and samples blueskyd's RSS every minute (it must stay flat). `scripts/soak` runs it.
struct SoakCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak",
        abstract: "Proxied calls at a steady rate for minutes, with 60-second access tokens; failed calls and RSS.",
        discussion: "Run it with scripts/soak [MINUTES] (the hermetic network and a release build). See docs/PERFORMANCE.md.")

    @Flag(help: "Print the report as one JSON object instead of text.") var json = false
    @Option(help: "Minutes of load.") var minutes = 30.0
    @Option(help: "Proxied calls per second, spread over the accounts.") var rate = 50.0
    @Option(help: "Socket connections the calls are spread over (each pipelines its calls).") var connections = 4
    @Option(help: "Accounts logged in with an app password (accounts.add).") var appPasswordAccounts = 3
    @Option(help: "Accounts logged in with OAuth (accounts.oauth.begin / complete).") var oauthAccounts = 3
    @Option(help: "Lifetime of the testbed's access tokens, both kinds, in seconds.") var tokenLifetimeSeconds = 60
    @Option(help: "Milliseconds the testbed takes to answer a refresh (after rotating the tokens).") var refreshLatencyMs = 100
    @Option(help: "Seconds between samples of blueskyd's RSS and CPU.") var sampleSeconds = 60.0
    @Flag(help: "Run the testbed inside this process instead of a child process.") var inProcessUpstream = false
    @Option(help: "Seconds after which the soak gives up (children are killed); default: its length plus 10 minutes.")
    var timeLimit: Double?

    func validate() throws {
        guard minutes > 0, rate > 0, connections > 0, sampleSeconds >= 1 else {
            throw ValidationError("--minutes, --rate, --connections must be positive and --sample-seconds at least 1")
        }
        guard appPasswordAccounts + oauthAccounts > 0, appPasswordAccounts >= 0, oauthAccounts >= 0 else {
            throw ValidationError("the soak needs at least one account")
        }
        guard tokenLifetimeSeconds >= 10 else { throw ValidationError("--token-lifetime-seconds must be at least 10") }
    }

    func run() async throws {
        Watchdog.arm(seconds: timeLimit ?? minutes * 60 + 600)
        signal(SIGPIPE, SIG_IGN)
        // blueskyd must use the state directory's key file, not a systemd credential.
        unsetenv("CREDENTIALS_DIRECTORY")
        var report = SoakReport(
            machine: .current(), daemonBinary: Binaries.path("blueskyd"), minutes: minutes, callsPerSecond: rate,
            connections: connections, tokenLifetimeSeconds: tokenLifetimeSeconds, refreshLatencyMilliseconds: refreshLatencyMs,
            appPasswordAccounts: appPasswordAccounts, oauthAccounts: oauthAccounts)
        if ProcessInfo.processInfo.environment["BLUESKYD_HERMETIC"] != "1" {
            report.problems.append("not run under scripts/hermetic-run: the tbN.test names may not resolve (use scripts/soak)")
        }
        if FileManager.default.isExecutableFile(atPath: report.daemonBinary) {
            let settings = UpstreamSettings(
                nonceRotationSeconds: 60, refreshLatencyMilliseconds: refreshLatencyMs,
                accessTokenLifetimeSeconds: tokenLifetimeSeconds, oauthAccessTokenLifetimeSeconds: tokenLifetimeSeconds)
            await SoakRun(settings: settings, command: self, progress: ProgressLog(enabled: true)).run(into: &report)
        } else {
            report.problems.append("no blueskyd executable at \(report.daemonBinary) (set BLUESKYD_BIN_DIR)")
        }
        print(json ? report.jsonText() : report.text())
        Watchdog.disarm()
    }
}
