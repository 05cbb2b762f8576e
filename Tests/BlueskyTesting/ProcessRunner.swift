import Foundation

/// A child process for tests: start it, capture or log its output, wait for it with a timeout.
/// The process is killed when the runner is released, so a failing test leaves nothing behind.
public final class ProcessRunner: @unchecked Sendable {
    /// What a finished command printed.
    public struct Output: Sendable {
        public let status: Int32
        public let standardOutput: String
        public let standardError: String

        public var succeeded: Bool { status == 0 }
    }

    public enum Failure: Error, CustomStringConvertible {
        case launchFailed(command: String, reason: String)
        case timedOut(command: String, after: Duration)
        case failed(command: String, status: Int32, standardError: String)

        public var description: String {
            switch self {
            case .launchFailed(let command, let reason): "cannot start \(command): \(reason)"
            case .timedOut(let command, let after): "\(command) did not finish within \(after)"
            case .failed(let command, let status, let stderr):
                "\(command) exited with status \(status): \(stderr.trimmingCharacters(in: .whitespacesAndNewlines))"
            }
        }
    }

    public let executable: String
    public let arguments: [String]
    /// Where stdout and stderr go (both to the same file), or nil when they are captured.
    public let logFile: String?

    private let process = Process()
    private let lock = NSLock()
    private var exitStatus: Int32?
    private var waiters: [UUID: CheckedContinuation<Int32?, Never>] = [:]
    /// Waits cancelled before they registered: they must not register afterwards.
    private var cancelledWaits: Set<UUID> = []
    private var captureDirectory: URL?
    private let input: String?

    /// - Parameters:
    ///   - logFile: append stdout and stderr to this file; nil captures them for ``standardOutput``.
    ///   - input: what the process reads on stdin (from a file, so it can never block); nil is /dev/null.
    public init(_ executable: String, _ arguments: [String] = [], environment: [String: String]? = nil,
                workingDirectory: String? = nil, logFile: String? = nil, input: String? = nil) {
        self.input = input
        self.executable = executable
        self.arguments = arguments
        self.logFile = logFile
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        if let workingDirectory { process.currentDirectoryURL = URL(fileURLWithPath: workingDirectory) }
        process.standardInput = FileHandle.nullDevice
    }

    deinit {
        terminate()
        if let captureDirectory { try? FileManager.default.removeItem(at: captureDirectory) }
    }

    public var commandLine: String { ([executable] + arguments).joined(separator: " ") }
    public var pid: Int32 { process.processIdentifier }
    public var isRunning: Bool { lock.withLock { exitStatus == nil } && process.isRunning }

    /// Starts the process.
    public func start() throws {
        do {
            // Files, not pipes: a chatty process can never block on a full pipe, nor we on its stdin.
            let directory = FileManager.default.temporaryDirectory
                .appendingPathComponent("process-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            captureDirectory = directory
            if let input {
                let path = directory.appendingPathComponent("stdin").path
                _ = FileManager.default.createFile(atPath: path, contents: Data(input.utf8))
                process.standardInput = FileHandle(forReadingAtPath: path)
            }
            if let logFile {
                if !FileManager.default.fileExists(atPath: logFile) {
                    _ = FileManager.default.createFile(atPath: logFile, contents: nil)
                }
                let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: logFile))
                handle.seekToEndOfFile()
                process.standardOutput = handle
                process.standardError = handle
            } else {
                for name in ["stdout", "stderr"] {
                    _ = FileManager.default.createFile(atPath: directory.appendingPathComponent(name).path, contents: nil)
                }
                process.standardOutput = try FileHandle(forWritingTo: directory.appendingPathComponent("stdout"))
                process.standardError = try FileHandle(forWritingTo: directory.appendingPathComponent("stderr"))
            }
            process.terminationHandler = { [weak self] process in
                self?.finished(status: process.terminationStatus)
            }
            try process.run()
        } catch {
            throw Failure.launchFailed(command: commandLine, reason: "\(error)")
        }
    }

    /// Everything the process wrote to stdout so far (captured mode only).
    public var standardOutput: String { captured("stdout") }
    /// Everything the process wrote to stderr so far (captured mode only).
    public var standardError: String { captured("stderr") }

    /// Waits for the process to exit; returns its status, or nil if it still runs after `timeout`.
    public func waitForExit(timeout: Duration) async -> Int32? {
        let id = UUID()
        return await withTaskGroup(of: Int32?.self) { group in
            group.addTask {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        enum Registration { case exited(Int32), cancelled, waiting }
                        let registration: Registration = self.lock.withLock {
                            if let status = self.exitStatus { return .exited(status) }
                            if self.cancelledWaits.remove(id) != nil { return .cancelled }
                            self.waiters[id] = continuation
                            return .waiting
                        }
                        switch registration {
                        case .exited(let status): continuation.resume(returning: status)
                        case .cancelled: continuation.resume(returning: nil)
                        case .waiting: break
                        }
                    }
                } onCancel: {
                    let waiter = self.lock.withLock {
                        let waiter = self.waiters.removeValue(forKey: id)
                        if waiter == nil { self.cancelledWaits.insert(id) }
                        return waiter
                    }
                    waiter?.resume(returning: nil)
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? lock.withLock { exitStatus }
        }
    }

    /// Sends SIGTERM, then SIGKILL if the process has not exited within `grace`.
    public func stop(grace: Duration = .seconds(2)) async {
        guard isRunning else { return }
        process.terminate()
        if await waitForExit(timeout: grace) == nil {
            kill(process.processIdentifier, SIGKILL)
            _ = await waitForExit(timeout: .seconds(5))
        }
    }

    /// Kills the process at once (SIGKILL) without waiting; safe to call more than once.
    public func terminate() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    /// Runs a command to completion and returns what it printed; throws if it cannot start, runs
    /// longer than `timeout` (it is killed), or exits non-zero when `check` is set.
    @discardableResult
    public static func run(_ executable: String, _ arguments: [String] = [], environment: [String: String]? = nil,
                           input: String? = nil, timeout: Duration = .seconds(60),
                           check: Bool = true) async throws -> Output {
        let runner = ProcessRunner(executable, arguments, environment: environment, input: input)
        try runner.start()
        guard let status = await runner.waitForExit(timeout: timeout) else {
            runner.terminate()
            throw Failure.timedOut(command: runner.commandLine, after: timeout)
        }
        let output = Output(status: status, standardOutput: runner.standardOutput, standardError: runner.standardError)
        if check && status != 0 {
            throw Failure.failed(command: runner.commandLine, status: status, standardError: output.standardError)
        }
        return output
    }

    private func finished(status: Int32) {
        let resumed = lock.withLock {
            exitStatus = status
            defer { waiters.removeAll() }
            return Array(waiters.values)
        }
        for continuation in resumed { continuation.resume(returning: status) }
    }

    private func captured(_ name: String) -> String {
        guard let directory = captureDirectory,
              let data = FileManager.default.contents(atPath: directory.appendingPathComponent(name).path) else { return "" }
        return String(decoding: data, as: UTF8.self)
    }
}
