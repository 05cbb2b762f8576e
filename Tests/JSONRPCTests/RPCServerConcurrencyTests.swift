import Foundation
import JSONRPC
import RPCServer
import Testing

@Suite("RPCServer ordering and concurrency")
struct RPCServerConcurrencyTests {
    @Test("replies come in request order even when a later request finishes first")
    func orderedReplies() async throws {
        let handler = TestHandler()
        try await withServer(handler: handler) { server in
            let client = try await server.connect()
            try await client.send(#"{"jsonrpc":"2.0","method":"wait","params":{"latch":"A","tag":"first"},"id":1}"#)
            try await client.send(#"{"jsonrpc":"2.0","method":"echo","params":{"tag":"second"},"id":2}"#)
            await handler.events.waitFor("finished:second")
            #expect(!handler.events.all.contains("finished:first"))
            handler.latches.open("A")
            #expect(try await client.readReply()?["id"] == 1)
            #expect(try await client.readReply()?["id"] == 2)
        }
    }

    @Test("past the shared budget of buffered request bytes, another connection waits to be read; then it is served")
    func sharedRequestByteBudget() async throws {
        let handler = TestHandler()
        var configuration = RPCServer.Configuration(maxLineBytes: 1024)
        configuration.maxBufferedRequestBytes = 1024
        try await withServer(configuration: configuration, handler: handler) { server in
            let padding = String(repeating: "x", count: 600)
            let first = try await server.connect()
            try await first.send(#"{"jsonrpc":"2.0","method":"wait","params":{"latch":"A","tag":"big","pad":"\#(padding)"},"id":1}"#)
            await handler.events.waitFor("started:big")
            #expect(server.server.bufferedRequests.bytes > 600)

            let second = try await server.connect()
            try await second.send(#"{"jsonrpc":"2.0","method":"echo","params":{"tag":"other","pad":"\#(padding)"},"id":2}"#)
            let deadline = ContinuousClock.now + .seconds(10)
            while server.server.bufferedRequests.waitingConnections == 0, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(server.server.bufferedRequests.waitingConnections == 1, "the second line waits for room")
            #expect(!handler.events.all.contains("started:other"))

            handler.latches.open("A")
            #expect(try await first.readReply()?["id"] == 1)
            #expect(try await second.readReply()?["id"] == 2, "served once the first reply freed the room")
            let events = handler.events.all
            #expect(events.firstIndex(of: "started:other")! > events.firstIndex(of: "finished:big")!)
            #expect(try await second.call("echo", ["still": "alive"]) == .success(["still": "alive"]))
            // Released just after the reply is queued, so possibly a moment after the client read it.
            let settled = ContinuousClock.now + .seconds(10)
            while server.server.bufferedRequests.bytes != 0, ContinuousClock.now < settled {
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(server.server.bufferedRequests.bytes == 0 && server.server.bufferedRequests.waitingConnections == 0)
        }
    }

    @Test("pipelined requests with decreasing run times are answered in order")
    func pipelinedOrder() async throws {
        try await withServer { server in
            let client = try await server.connect()
            let count = 12
            for id in 1...count {
                let milliseconds = (count - id) * 10
                try await client.send(#"{"jsonrpc":"2.0","method":"sleep","params":{"ms":\#(milliseconds)},"id":\#(id)}"#)
            }
            var ids: [Int] = []
            for _ in 1...count {
                ids.append(try #require(try await client.readReply()?["id"]?.intValue))
            }
            #expect(ids == Array(1...count))
        }
    }

    @Test("50 clients making 20 calls each all get their own answers")
    func manyClients() async throws {
        try await withServer { server in
            let path = server.socketPath
            try await withThrowingTaskGroup(of: Int.self) { group in
                for clientNumber in 0..<50 {
                    group.addTask {
                        try await onThread {
                            let connection = try RPCClientConnection(socketPath: path, timeout: .seconds(30))
                            var answered = 0
                            for call in 0..<20 {
                                let params: JSONValue = ["client": .number(Double(clientNumber)), "call": .number(Double(call))]
                                if try connection.call(method: "echo", params: params) == .success(params) { answered += 1 }
                            }
                            return answered
                        }
                    }
                }
                var total = 0
                for try await answered in group { total += answered }
                #expect(total == 50 * 20)
            }
        }
    }

    @Test("a silent client and a client that never reads do not hold up another client")
    func slowClientsDoNotStallOthers() async throws {
        try await withServer(configuration: .init(maxConcurrentRequestsPerConnection: 8)) { server in
            let silent = try await server.connect()
            let flooder = try POSIXSockets.connectNonBlocking(to: server.socketPath)
            defer { close(flooder) }
            let payload = String(repeating: "p", count: 4096)
            let request = Array(#"{"jsonrpc":"2.0","method":"echo","params":["\#(payload)"],"id":1}"#.utf8) + [10]
            // The server stops reading once the flooder's replies pile up, so its writes block.
            let written = POSIXSockets.writeUntilBlocked(flooder, chunk: request, limit: 256 << 20)
            #expect(written != nil, "the server kept reading 256 MiB from a client that never reads")

            // A stalled server would make these calls time out (and throw); the generous timeout
            // keeps a loaded CI machine from failing a test that is about stalls, not speed.
            let other = try await server.connect(timeout: .seconds(30))
            for call in 0..<10 {
                #expect(try await other.call("echo", [.number(Double(call))]) == .success([.number(Double(call))]))
            }
            _ = silent
        }
    }

    @Test("after a half-close every outstanding reply still arrives, then EOF")
    func halfClose() async throws {
        let handler = TestHandler()
        try await withServer(handler: handler) { server in
            let client = try await server.connect()
            try await client.send(#"{"jsonrpc":"2.0","method":"wait","params":{"latch":"H","tag":"slow"},"id":1}"#)
            try await client.send(#"{"jsonrpc":"2.0","method":"echo","params":{"tag":"fast"},"id":2}"#)
            try await client.send(#"{"jsonrpc":"2.0","method":"echo","params":{"tag":"last"},"id":3}"#)
            await handler.events.waitFor("started:slow")
            try client.closeWriteSide()
            handler.latches.open("H")
            #expect(try await client.readReply()?["id"] == 1)
            #expect(try await client.readReply()?["id"] == 2)
            #expect(try await client.readReply()?["id"] == 3)
            #expect(try await client.readReply() == nil)
        }
    }

    @Test("socat sending a request then EOF gets its reply")
    func halfCloseWithSocat() async throws {
        try await withServer { server in
            let output = try await runProcess(
                "/usr/bin/socat", ["-t", "30", "-", "UNIX-CONNECT:\(server.socketPath)"],
                input: #"{"jsonrpc":"2.0","method":"echo","params":["via socat"],"id":1}"# + "\n")
            #expect(output.status == 0)
            let reply = try JSONValue.parse(Array(output.stdout.utf8))
            #expect(reply["result"] == ["via socat"])
        }
    }

    @Test("shutdown lets a request in flight finish, then closes and removes the socket")
    func gracefulShutdown() async throws {
        let handler = TestHandler()
        try await withServer(handler: handler) { server in
            let client = try await server.connect()
            try await client.send(#"{"jsonrpc":"2.0","method":"wait","params":{"latch":"S","tag":"inflight"},"id":1}"#)
            await handler.events.waitFor("started:inflight")
            server.server.shutdownGracefully()
            handler.latches.open("S")
            #expect(try await client.readReply()?["result"] == "S")
            #expect(try await client.readReply() == nil)
            try await server.task.value
            #expect(!FileManager.default.fileExists(atPath: server.socketPath))
        }
    }

    @Test("a request that outlives the grace period is cut off")
    func gracePeriodExpires() async throws {
        let handler = TestHandler()
        try await withServer(configuration: .init(shutdownGracePeriod: .milliseconds(200)), handler: handler) { server in
            let client = try await server.connect()
            try await client.send(#"{"jsonrpc":"2.0","method":"wait","params":{"latch":"never","tag":"stuck"},"id":1}"#)
            await handler.events.waitFor("started:stuck")
            server.task.cancel()
            try await server.task.value
            #expect(try await client.readReply() == nil)
            handler.latches.open("never")
        }
    }
}

/// Runs a program to completion with `input` on stdin.
func runProcess(_ path: String, _ arguments: [String], input: String = "") async throws -> (status: Int32, stdout: String, stderr: String) {
    try await onThread {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let stdin = Pipe()
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        stdin.fileHandleForWriting.write(Data(input.utf8))
        try stdin.fileHandleForWriting.close()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        let err = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: out, as: UTF8.self), String(decoding: err, as: UTF8.self))
    }
}
