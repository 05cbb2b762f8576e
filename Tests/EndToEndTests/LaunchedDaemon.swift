import BlueskyTesting
import Foundation
import JSONRPC

/// blueskyd (or a launcher that execs it) started directly, with the environment a service
/// manager would give it; for the tests of the systemd integration.
final class LaunchedDaemon: @unchecked Sendable {
    let runner: ProcessRunner
    let logFile: String
    let socketPath: String

    /// - Parameters:
    ///   - executable: blueskyd itself, or a launcher such as systemd-socket-activate.
    ///   - environment: added to a clean copy of the test's environment (HOME is the directory).
    init(directory: TemporaryDirectory, socketPath: String, executable: String = Binaries.path("blueskyd"),
         arguments: [String], environment extra: [String: String] = [:], logFile: String? = nil) throws {
        var environment = ProcessInfo.processInfo.environment
        for key in environment.keys where key.hasPrefix("BLUESKYD_") || key.hasPrefix("LISTEN_")
            || ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM", "CREDENTIALS_DIRECTORY"].contains(key) {
            environment.removeValue(forKey: key)
        }
        environment["HOME"] = directory.path
        environment.merge(extra) { _, new in new }
        self.socketPath = socketPath
        self.logFile = logFile ?? directory.file("blueskyd-\(UUID().uuidString.prefix(6)).log")
        runner = ProcessRunner(executable, arguments, environment: environment, logFile: self.logFile)
        try runner.start()
    }

    var pid: Int32 { runner.pid }
    var log: String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

    func signal(_ number: Int32) { kill(runner.pid, number) }

    /// One call on a fresh connection; an RPC error is thrown.
    @discardableResult
    func call(_ method: String, _ params: JSONValue? = nil) async throws -> JSONValue {
        let socketPath = self.socketPath
        return try await offThePool {
            let connection = try RPCClientConnection(socketPath: socketPath, timeout: .seconds(60))
            defer { connection.close() }
            return try connection.call(method: method, params: params).get()
        }
    }

    /// SIGTERM, then the exit status (nil if it had to be killed after `timeout`).
    func stop(timeout: Duration = .seconds(30)) async -> Int32? {
        signal(SIGTERM)
        let status = await runner.waitForExit(timeout: timeout)
        if status == nil { runner.terminate() }
        return status
    }

    /// How many times `text` occurs in the log so far.
    func logCount(_ text: String) -> Int {
        log.components(separatedBy: text).count - 1
    }
}
