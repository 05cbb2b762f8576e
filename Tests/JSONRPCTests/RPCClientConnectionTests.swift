import Foundation
import JSONRPC
import RPCServer
import Testing

@Suite("RPCClientConnection")
struct RPCClientConnectionTests {
    @Test("call returns results and error replies, with increasing ids")
    func calls() async throws {
        try await withServer { server in
            let client = try await server.connect()
            #expect(try await client.call("echo", ["a": 1]) == .success(["a": 1]))
            let failure = try await client.call("no.such")
            #expect(failure == .failure(.methodNotFound("no.such")))
            #expect(try await client.call("fail") == .failure(.invalidParams("x is wrong", field: "x")))
            // Raw lines interleave with calls: the next call's id is 4.
            try await client.send(#"{"jsonrpc":"2.0","method":"echo","params":["raw"],"id":"r"}"#)
            #expect(try await client.readReply()?["result"] == ["raw"])
        }
    }

    @Test("a missing socket means the daemon is not running")
    func daemonNotRunning() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/absent.sock"
        let error = #expect(throws: RPCClientError.daemonNotRunning(path)) { try RPCClientConnection(socketPath: path) }
        #expect(error?.description.contains("not running") == true)
    }

    @Test("a reply that does not come in time is a timeout")
    func timeout() async throws {
        let handler = TestHandler()
        try await withServer(handler: handler) { server in
            let client = try await server.connect(timeout: .milliseconds(200))
            await #expect(throws: RPCClientError.timedOut) {
                try await client.call("wait", ["latch": "never"])
            }
            handler.latches.open("never")
        }
    }

    @Test("readLine returns nil at the end of the stream")
    func endOfStream() async throws {
        try await withServer { server in
            let client = try await server.connect()
            try client.closeWriteSide()
            #expect(try await client.readReply() == nil)
        }
    }
}
