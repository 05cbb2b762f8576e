import ATTestbed
import Foundation
import JSONRPC

/// A real `blueskyd` process for end-to-end tests and the bench, with its own state directory
/// and socket.
public final class DaemonProcess: @unchecked Sendable {
    public let stateDirectory: String
    public let socketPath: String
    /// The XRPC gateway's socket (blueskyd's default: beside the JSON-RPC socket).
    public let gatewaySocketPath: String
    public let logFile: String
    public let arguments: [String]
    private let process = Process()

    /// Starts blueskyd against `testbed` and waits until its socket answers.
    /// `asUser` runs it under another uid/gid with setpriv (the directories are handed over to it).
    /// `readyTimeout`: how long it may take to answer (it loads every account first).
    /// `executable`: another blueskyd than this build's (the bench's baseline).
    public init(directory: String, testbed: Testbed?, extraArguments: [String] = [],
                asUser: (uid: UInt32, gid: UInt32)? = nil, logLevel: String = "debug",
                readyTimeout: Duration = .seconds(60), executable: String? = nil) async throws {
        let executable = executable ?? Binaries.path("blueskyd")
        stateDirectory = directory + "/state"
        socketPath = directory + "/run/blueskyd.sock"
        gatewaySocketPath = directory + "/run/xrpc.sock"
        logFile = directory + "/blueskyd-\(UUID().uuidString.prefix(6)).log"
        var args = ["--state-directory", stateDirectory, "--socket", socketPath, "--log-level", logLevel]
        if let testbed {
            args += ["--ca-file", testbed.caFile, "--plc-url", testbed.plcURL]
        }
        args += extraArguments
        arguments = args
        FileManager.default.createFile(atPath: logFile, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logFile))
        if let user = asUser {
            for dir in [directory, directory + "/run", stateDirectory] {
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
                chown(dir, user.uid, user.gid)
            }
            chmod(directory + "/run", 0o700)
            chown(logFile, user.uid, user.gid)
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid=\(user.uid)", "--regid=\(user.gid)", "--clear-groups", "--",
                                 executable] + args
        } else {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = args
        }
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = directory
        environment.removeValue(forKey: "BLUESKYD_SOCKET")
        process.environment = environment
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
        try await waitUntilReady(timeout: readyTimeout)
    }

    deinit {
        if process.isRunning { process.interrupt(); kill(process.processIdentifier, SIGKILL) }
    }

    public var pid: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }

    /// Polls the socket until a `daemon.info` call succeeds; fails early if the daemon exits.
    public func waitUntilReady(timeout: Duration = .seconds(60)) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            guard process.isRunning else {
                throw DaemonProcessError.exited(status: process.terminationStatus, log: log)
            }
            if try await answers() { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw DaemonProcessError.notReady(log: log)
    }

    /// One call on a fresh connection (off the concurrency pool); an RPC error is thrown.
    @discardableResult
    public func call(_ method: String, _ params: JSONValue? = nil) async throws -> JSONValue {
        let socketPath = self.socketPath
        return try await offThePool {
            let connection = try RPCClientConnection(socketPath: socketPath, timeout: .seconds(60))
            defer { connection.close() }
            return try connection.call(method: method, params: params).get()
        }
    }

    /// True once the server answers, even with `PermissionDenied`, or once it listens as
    /// another uid (which the client refuses to talk to).
    private func answers() async throws -> Bool {
        let socketPath = self.socketPath
        return try await offThePool {
            let connection: RPCClientConnection
            do {
                connection = try RPCClientConnection(socketPath: socketPath, timeout: .seconds(5))
            } catch RPCClientError.foreignPeer {
                return true
            } catch {
                return false
            }
            defer { connection.close() }
            switch Result(catching: { try connection.call(method: "daemon.info") }) {
            case .success(.success): return true
            case .failure(RPCClientError.permissionDenied): return true
            default: return false
            }
        }
    }

    /// SIGTERM, then waits for the exit status; a daemon still running after `timeout` (its
    /// unit's TimeoutStopSec) is killed, as systemd would, so a hung stop never hangs the caller.
    @discardableResult
    public func stop(timeout: Duration = .seconds(90)) async -> Int32 {
        if process.isRunning { process.terminate() }
        if !(await exited(within: timeout)) { await crash() }
        return process.terminationStatus
    }

    /// SIGKILL: the crash case.
    public func crash() async {
        kill(process.processIdentifier, SIGKILL)
        // The kernel ends a killed process at once; only reaping it takes a moment.
        _ = await exited(within: .seconds(30))
    }

    private func exited(within timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        return !process.isRunning
    }

    /// Everything the daemon has logged so far.
    public var log: String {
        (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
    }
}

public enum DaemonProcessError: Error, CustomStringConvertible {
    case exited(status: Int32, log: String)
    case notReady(log: String)

    public var description: String {
        switch self {
        case .exited(let status, let log): "blueskyd exited with status \(status):\n\(log)"
        case .notReady(let log): "blueskyd did not answer on its socket in time:\n\(log)"
        }
    }
}
