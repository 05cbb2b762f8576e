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
}

/// Name of the account the benchmark logs in with.
let benchAccountName = "bench"

extension UpstreamInfo {
    /// Starts a testbed in the hermetic network with the benchmark account.
    static func startTestbed(directory: String) async throws -> (Testbed, UpstreamInfo) {
        let testbed = try await Testbed.startInHermeticNetwork(directory: directory) { configuration in
            // No refresh may happen during the measurements.
            configuration.accessTokenLifetime = .seconds(24 * 3600)
        }
        let account = await testbed.createAccount(AccountSpec(name: benchAccountName, initialPosts: 3))
        let info = UpstreamInfo(
            caFile: testbed.caFile, pdsURL: testbed.pdsURL, plcURL: testbed.plcURL,
            did: account.did, handle: account.handle, appPassword: account.appPassword)
        return (testbed, info)
    }
}

/// `blueskyd-bench upstream`: serves the testbed in its own process, so the PDS does not share
/// the benchmark client's event loops. Prints one JSON line (`UpstreamInfo`), then serves until
/// its standard input reaches end of file (the parent exited or closed the pipe).
struct UpstreamCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upstream", abstract: "Serves the testbed PDS for a benchmark run (internal).",
        shouldDisplay: false)

    @Option(help: "Directory for the testbed's CA certificate.") var directory: String

    func run() async throws {
        let (testbed, info) = try await UpstreamInfo.startTestbed(directory: directory)
        FileHandle.standardOutput.write(try JSONEncoder().encode(info) + Data("\n".utf8))
        await Task.detached {
            while let chunk = try? FileHandle.standardInput.read(upToCount: 4096), !chunk.isEmpty {}
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

    /// Starts `<this executable> upstream` and waits (up to `timeout`) for its JSON line.
    init(directory: String, timeout: Duration = .seconds(60)) async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = ["upstream", "--directory", directory]
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
        let lineTask = Task.detached { () -> String? in
            var bytes: [UInt8] = []
            while let chunk = try? reader.read(upToCount: 1), let byte = chunk.first {
                if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
                bytes.append(byte)
            }
            return nil
        }
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
