import ArgumentParser
import ATTestbed
import Foundation

/// What the benchmark needs to know about the testbed it measures against.
/// Passed from the upstream child process as one JSON line on its standard output.
struct UpstreamInfo: Codable, Sendable {
    var caFile: String
    var pdsURL: String
    var plcURL: String
    var did: String
    var handle: String
    /// The benchmark account's app password (only ever sent over the pipe, never printed).
    var appPassword: String
    /// How often the testbed's DPoP nonces rotate (its PDS's and its authorization server's).
    var dpopNonceRotationSeconds: Int
    /// The PDS's authorization server (issuer URL).
    var oauthIssuer: String
    /// The testbed's Mastodon-compatible instance, where the benchmark user `bench` signs in
    /// (the oauth2 section).
    var mastodonURL: String
}

/// Name of the account the benchmark logs in with.
let benchAccountName = "bench"

extension UpstreamInfo {
    /// Starts a testbed in the hermetic network with the benchmark account.
    static func startTestbed(directory: String, settings: UpstreamSettings) async throws -> (Testbed, UpstreamInfo) {
        // By default no refresh happens during the measurements, for either kind of session.
        let testbed = try await Testbed.startInHermeticNetwork(directory: directory, configure: settings.configure)
        let account = await testbed.createAccount(AccountSpec(name: benchAccountName, initialPosts: 3))
        testbed.addMastodonUser(username: benchAccountName, displayName: "Bench")
        // Tokens that outlive the run: no refresh during the measurements.
        testbed.setMastodonAccessTokenLifetime(.seconds(24 * 3600))
        let info = UpstreamInfo(
            caFile: testbed.caFile, pdsURL: testbed.pdsURL, plcURL: testbed.plcURL,
            did: account.did, handle: account.handle, appPassword: account.appPassword,
            dpopNonceRotationSeconds: settings.nonceRotationSeconds, oauthIssuer: testbed.oauthIssuer,
            mastodonURL: testbed.mastodonURL)
        return (testbed, info)
    }
}

/// `blueskyd-bench upstream`: serves the testbed in its own process, so the PDS does not share
/// the benchmark client's event loops. Prints one JSON line (`UpstreamInfo`), then answers the
/// parent's requests on its standard input (`UpstreamRequest`, one reply line each) until end
/// of file (the parent exited or closed the pipe).
struct UpstreamCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upstream", abstract: "Serves the testbed PDS for a benchmark run (internal).",
        shouldDisplay: false)

    @Option(help: "Directory for the testbed's CA certificate.") var directory: String
    @Option(help: "Seconds between DPoP nonce rotations.") var dpopNonceRotationSeconds = 60
    @Option(help: "Milliseconds before a refresh is answered.") var refreshLatencyMs = 0
    @Option(help: "Lifetime of app-password access tokens, seconds.") var accessTokenLifetimeSeconds = 24 * 3600
    @Option(help: "Lifetime of OAuth access tokens, seconds.") var oauthAccessTokenLifetimeSeconds = 24 * 3600

    func run() async throws {
        let settings = UpstreamSettings(
            nonceRotationSeconds: dpopNonceRotationSeconds, refreshLatencyMilliseconds: refreshLatencyMs,
            accessTokenLifetimeSeconds: accessTokenLifetimeSeconds,
            oauthAccessTokenLifetimeSeconds: oauthAccessTokenLifetimeSeconds)
        let (testbed, info) = try await UpstreamInfo.startTestbed(directory: directory, settings: settings)
        FileHandle.standardOutput.write(try JSONEncoder().encode(info) + Data("\n".utf8))
        await Task.detached {
            while let line = readLine() {
                FileHandle.standardOutput.write(await UpstreamRequest.answer(line, testbed: testbed) + Data("\n".utf8))
            }
        }.value
        try? await testbed.shutdown()
    }
}

/// The upstream child process, seen from the benchmark.
final class UpstreamProcess: @unchecked Sendable {
    let info: UpstreamInfo
    let pid: Int32
    private let process: Process
    private let stdinPipe: Pipe
    private let replies: FileHandle
    /// One request and its reply at a time on the pipes.
    private let exchange = NSLock()

    /// Starts `<this executable> upstream` and waits (up to `timeout`) for its JSON line.
    init(directory: String, settings: UpstreamSettings, timeout: Duration = .seconds(60)) async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = ["upstream", "--directory", directory] + settings.arguments
        let stdinPipe = Pipe()
        let stdoutPipe = Pipe()
        process.standardInput = stdinPipe
        process.standardOutput = stdoutPipe
        process.standardError = FileHandle.standardError
        try process.run()
        Watchdog.track(process.processIdentifier)
        self.process = process
        self.stdinPipe = stdinPipe
        self.pid = process.processIdentifier
        let reader = stdoutPipe.fileHandleForReading
        self.replies = reader
        let lineTask = Task.detached { Self.readLine(from: reader) }
        let childPID = process.processIdentifier
        let line = try await withThrowingTaskGroup(of: String?.self) { group in
            group.addTask { await lineTask.value }
            group.addTask {
                try await Task.sleep(for: timeout)
                // Unblocks the reader: the pipe reaches end of file.
                kill(childPID, SIGKILL)
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
        }
        guard let line, let info = try? JSONDecoder().decode(UpstreamInfo.self, from: Data(line.utf8)) else {
            process.terminate()
            Watchdog.untrack(process.processIdentifier)
            throw BenchError.upstreamFailed(process.isRunning ? "no startup line in time" : "the testbed process exited")
        }
        self.info = info
    }

    /// Sends one request line and returns the child's reply line (nil: the child is gone).
    func send(_ request: String) async -> String? {
        let (input, output, exchange) = (stdinPipe.fileHandleForWriting, replies, exchange)
        guard process.isRunning else { return nil }
        return await Task.detached {
            exchange.withLock {
                guard (try? input.write(contentsOf: Data((request + "\n").utf8))) != nil else { return nil }
                return Self.readLine(from: output)
            }
        }.value
    }

    /// Reads up to the next newline, byte by byte: nothing past the line is consumed, and the
    /// child writes only a few lines in a whole run.
    private static func readLine(from handle: FileHandle) -> String? {
        var bytes: [UInt8] = []
        while let chunk = try? handle.read(upToCount: 1), let byte = chunk.first {
            if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
        return nil
    }

    /// Closes its standard input (it then shuts down), and kills it if it lingers.
    func stop() async {
        try? stdinPipe.fileHandleForWriting.close()
        let deadline = ContinuousClock.now + .seconds(5)
        while process.isRunning, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        Watchdog.untrack(pid)
    }
}

/// An upstream as started: in a child process (the default) or in this one.
struct StartedUpstream: Sendable {
    let info: UpstreamInfo
    /// Where it runs, for the report.
    let description: String
    /// Its counters, minted sessions, refresh margins, more accounts (`UpstreamRequest`).
    let control: any UpstreamControl
    /// The child's pid; nil when the testbed runs in this process.
    var pid: Int32? { process?.pid }
    private let process: UpstreamProcess?
    private let testbed: Testbed?

    static func start(directory: String, settings: UpstreamSettings, inProcess: Bool) async throws -> StartedUpstream {
        if inProcess {
            let (testbed, info) = try await UpstreamInfo.startTestbed(directory: directory, settings: settings)
            return StartedUpstream(
                info: info, description: "ATTestbed PDS at \(info.pdsURL), in the benchmark process (shares its event loops), "
                    + settings.summary,
                control: InProcessUpstream(testbed: testbed), process: nil, testbed: testbed)
        }
        let process = try await UpstreamProcess(directory: directory, settings: settings)
        return StartedUpstream(
            info: process.info,
            description: "ATTestbed PDS at \(process.info.pdsURL), HTTPS with a generated CA, "
                + "in its own process (`blueskyd-bench upstream`, pid \(process.pid)), " + settings.summary,
            control: process, process: process, testbed: nil)
    }

    func stop() async {
        await process?.stop()
        try? await testbed?.shutdown()
    }
}
