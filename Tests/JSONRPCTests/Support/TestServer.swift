import Foundation
import JSONRPC
import Logging
import RPCServer

/// A temporary directory (mode 0700), removed with its contents by `remove()`.
struct TemporaryDirectory: Sendable {
    let path: String

    init() throws {
        var template = Array("/tmp/jsonrpc-test-XXXXXX".utf8CString)
        guard let created = mkdtemp(&template) else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        path = String(cString: created)
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// A server running in a task, on a socket in its own temporary directory.
struct RunningServer: Sendable {
    let server: RPCServer
    let handler: TestHandler
    let socketPath: String
    let task: Task<Void, any Error>

    /// Cancels `run()` (a graceful shutdown) and waits for it to return.
    func stop() async throws {
        task.cancel()
        try await task.value
    }

    /// A blocking client connection on a thread of its own; see `onThread`.
    func connect(timeout: Duration = .seconds(10)) async throws -> TestClient {
        let path = socketPath
        return try await onThread { TestClient(try RPCClientConnection(socketPath: path, timeout: timeout)) }
    }
}

/// Wraps the non-Sendable blocking connection so tests can hand it between threads one at a
/// time (every use goes through `onThread`, awaited before the next).
final class TestClient: @unchecked Sendable {
    let connection: RPCClientConnection

    init(_ connection: RPCClientConnection) {
        self.connection = connection
    }

    func send(_ line: String) async throws {
        try await onThread { try self.connection.send(rawLine: line) }
    }

    /// The next reply line parsed as JSON; nil at end of stream.
    func readReply() async throws -> JSONValue? {
        try await onThread {
            guard let line = try self.connection.readLineBytes() else { return nil }
            return try JSONValue.parse(line)
        }
    }

    /// The next reply line as text; nil at end of stream.
    func readRawLine() async throws -> String? {
        try await onThread {
            try self.connection.readLineBytes().map { String(decoding: $0, as: UTF8.self) }
        }
    }

    func call(_ method: String, _ params: JSONValue? = nil) async throws -> Result<JSONValue, RPCError> {
        try await onThread { try self.connection.call(method: method, params: params) }
    }

    func closeWriteSide() throws {
        try connection.closeWriteSide()
    }
}

let quietLogger = Logger(label: "jsonrpc-tests") { _ in SwiftLogNoOpLogHandler() }

/// Runs a server for `body`, then stops it (and removes its directory) whatever happens.
func withServer<Result: Sendable>(
    configuration: RPCServer.Configuration = .init(),
    handler: TestHandler = TestHandler(),
    _ body: (RunningServer) async throws -> Result
) async throws -> Result {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let socketPath = directory.path + "/rpc.sock"
    let server = RPCServer(socketPath: socketPath, configuration: configuration, handler: handler, logger: quietLogger)
    let task = Task { try await server.run() }
    let running = RunningServer(server: server, handler: handler, socketPath: socketPath, task: task)
    do {
        try await server.waitUntilListening()
        let result = try await body(running)
        try await running.stop()
        return result
    } catch {
        try? await running.stop()
        throw error
    }
}

/// Runs blocking socket code on a dedicated thread: blocking Swift concurrency's few
/// cooperative threads could starve the very handlers the test is waiting for.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.start()
    }
}

/// `error.data.name` of an error reply.
func errorName(_ reply: JSONValue?) -> String? {
    reply?["error"]?["data"]?["name"]?.stringValue
}
