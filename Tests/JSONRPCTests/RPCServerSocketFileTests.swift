import Foundation
import JSONRPC
import RPCServer
import Testing

@Suite("RPCServer socket file")
struct RPCServerSocketFileTests {
    private func makeServer(_ path: String, _ configuration: RPCServer.Configuration = .init()) -> RPCServer {
        RPCServer(socketPath: path, configuration: configuration, handler: TestHandler(), logger: quietLogger)
    }

    /// Runs `server` for `body`, then stops it.
    private func running<T: Sendable>(_ server: RPCServer, _ body: () async throws -> T) async throws -> T {
        let task = Task { try await server.run() }
        defer { task.cancel() }
        try await server.waitUntilListening()
        let result = try await body()
        task.cancel()
        try await task.value
        return result
    }

    @Test("creates a missing directory 0700 and the socket 0600, and removes the socket on shutdown")
    func permissions() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let socketDirectory = directory.path + "/run"
        let path = socketDirectory + "/rpc.sock"
        try await running(makeServer(path)) {
            #expect(POSIXSockets.mode(of: socketDirectory) == 0o700)
            #expect(POSIXSockets.mode(of: path) == 0o600)
        }
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test("a stale socket file is replaced")
    func staleSocket() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/rpc.sock"
        try POSIXSockets.makeStaleSocketFile(at: path)
        #expect(throws: RPCClientError.daemonNotRunning(path)) { try RPCClientConnection(socketPath: path) }
        try await running(makeServer(path)) {
            let result = try await onThread {
                try RPCClientConnection(socketPath: path, timeout: .seconds(10)).call(method: "echo", params: ["ok"])
            }
            #expect(result == .success(["ok"]))
        }
    }

    @Test("a live socket is never replaced: the second server fails with alreadyInUse")
    func liveSocket() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/rpc.sock"
        try await running(makeServer(path)) {
            let second = makeServer(path)
            await #expect(throws: RPCServerError.alreadyInUse(path)) { try await second.run() }
            await #expect(throws: RPCServerError.alreadyInUse(path)) { try await second.waitUntilListening() }
            let result = try await onThread {
                try RPCClientConnection(socketPath: path, timeout: .seconds(10)).call(method: "echo", params: ["first"])
            }
            #expect(result == .success(["first"]))
        }
    }

    @Test("refuses a directory others can write")
    func insecureDirectory() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        chmod(directory.path, 0o777)
        let error = await #expect(throws: RPCServerError.self) { try await makeServer(directory.path + "/rpc.sock").run() }
        guard case .insecureDirectory(let path, _)? = error else {
            Issue.record("expected insecureDirectory, got \(String(describing: error))")
            return
        }
        #expect(path == directory.path)
        #expect(error?.description.contains("writable by group or others") == true)
    }

    @Test("refuses a directory owned by another user")
    func foreignDirectory() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try #require(chown(directory.path, 4242, 4242) == 0)
        let error = await #expect(throws: RPCServerError.self) { try await makeServer(directory.path + "/rpc.sock").run() }
        #expect(error?.description.contains("owned by uid 4242") == true)
    }

    @Test("leaves a file that is not a socket alone")
    func notASocket() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/rpc.sock"
        try Data("precious".utf8).write(to: URL(fileURLWithPath: path))
        await #expect(throws: RPCServerError.notASocket(path)) { try await makeServer(path).run() }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "precious")
    }

    @Test("serves an inherited listening socket")
    func inheritedSocket() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/inherited.sock"
        let descriptor = try POSIXSockets.makeListeningSocket(at: path)
        let server = RPCServer(inheritedListeningFD: descriptor, handler: TestHandler(), logger: quietLogger)
        try await running(server) {
            let result = try await onThread {
                try RPCClientConnection(socketPath: path, timeout: .seconds(10)).call(method: "echo", params: ["inherited"])
            }
            #expect(result == .success(["inherited"]))
        }
    }
}
