import BlueskyHTTP
import Foundation
import Testing

@Suite("The keep-alive client of proxied calls")
struct KeepAliveHTTPClientTests {
    private func client(maxBodyBytes: Int = 1 << 20, maxConnections: Int = 32) throws -> KeepAliveHTTPClient {
        try KeepAliveHTTPClient(.init(policy: HTTPPolicy(allowInsecureLoopback: true), maxBodyBytes: maxBodyBytes,
                                      maxConnectionsPerOrigin: maxConnections))
    }

    private func url(_ server: ScriptedHTTPServer, _ target: String) -> URL {
        URL(string: "http://127.0.0.1:\(server.port)\(target)")!
    }

    private func text(_ response: InboundResponse) -> String { String(decoding: response.body, as: UTF8.self) }

    @Test("sequential requests share one connection, and the target reaches the server as written")
    func reusesConnections() async throws {
        let server = try await ScriptedHTTPServer.start()
        let http = try client()
        for n in 0..<10 {
            let response = try await http.send(OutboundRequest(url: url(server, "/echo?q=a%2Bb&n=\(n)#frag")))
            #expect(response.status == 200)
            #expect(text(response) == "GET /echo?q=a%2Bb&n=\(n) 1 ")
            #expect(response.header("content-type") == "text/plain")
        }
        #expect(server.connections == 1)
        await http.shutdown()
        await server.stop()
    }

    @Test("a procedure's body and headers are sent")
    func sendsBodies() async throws {
        let server = try await ScriptedHTTPServer.start()
        let http = try client()
        let request = OutboundRequest(method: "POST", url: url(server, "/echo"),
                                      headers: [("Content-Type", "application/json")], body: Array(#"{"a":1}"#.utf8))
        let response = try await http.send(request)
        #expect(text(response) == #"POST /echo 1 {"a":1}"#)
        let empty = try await http.send(OutboundRequest(method: "POST", url: url(server, "/echo"), body: []))
        #expect(text(empty) == "POST /echo 1 ", "an empty procedure body still reuses the connection")
        await http.shutdown()
        await server.stop()
    }

    @Test("Connection: close is honoured, and the next request opens a new connection")
    func honoursClose() async throws {
        let server = try await ScriptedHTTPServer.start()
        let http = try client()
        #expect(text(try await http.send(OutboundRequest(url: url(server, "/close")))) == "bye")
        #expect(text(try await http.send(OutboundRequest(url: url(server, "/echo")))) == "GET /echo 2 ")
        #expect(server.connections == 2)
        await http.shutdown()
        await server.stop()
    }

    @Test("a kept connection the server drops unanswered is replaced, and the caller sees no error")
    func retriesAfterIdleClose() async throws {
        let server = try await ScriptedHTTPServer.start()
        let http = try client()
        #expect(text(try await http.send(OutboundRequest(url: url(server, "/drop-next")))) == "ok")
        #expect(text(try await http.send(OutboundRequest(url: url(server, "/echo")))) == "GET /echo 2 ")
        #expect(server.connections == 2)
        await http.shutdown()
        await server.stop()
    }

    @Test("a silent server times out, an oversized answer is refused, a closed port is unreachable")
    func failures() async throws {
        let server = try await ScriptedHTTPServer.start()
        let http = try client(maxBodyBytes: 1024)
        await #expect(throws: HTTPError.timedOut("http://127.0.0.1:\(server.port)/silent")) {
            _ = try await http.send(OutboundRequest(url: url(server, "/silent")), timeout: .milliseconds(200))
        }
        await #expect(throws: HTTPError.bodyTooLarge("http://127.0.0.1:\(server.port)/big", limit: 1024)) {
            _ = try await http.send(OutboundRequest(url: url(server, "/big")))
        }
        #expect(text(try await http.send(OutboundRequest(url: url(server, "/echo")))).hasPrefix("GET /echo"),
                "the client still works after failed exchanges")
        let port = server.port
        await server.stop()
        let fresh = try client()
        do {
            _ = try await fresh.send(OutboundRequest(url: URL(string: "http://127.0.0.1:\(port)/echo")!))
            Issue.record("a stopped server cannot answer")
        } catch {
            guard case .unreachable = error else { throw error }
            #expect(error.isTransient)
        }
        await http.shutdown()
    }

    @Test("plain http is refused unless allowed, and then only to loopback")
    func appliesThePolicy() async throws {
        let strict = try KeepAliveHTTPClient()
        await #expect(throws: HTTPError.insecureURL("http://127.0.0.1:9/xrpc")) {
            _ = try await strict.send(OutboundRequest(url: URL(string: "http://127.0.0.1:9/xrpc")!))
        }
        let relaxed = try client()
        await #expect(throws: HTTPError.insecureURL("http://example.com/xrpc")) {
            _ = try await relaxed.send(OutboundRequest(url: URL(string: "http://example.com/xrpc")!))
        }
    }

    @Test("a burst of requests shares at most the allowed connections, and every request is answered")
    func capsConnections() async throws {
        let server = try await ScriptedHTTPServer.start()
        let http = try client(maxConnections: 2)
        let target = url(server, "/slow")
        let answers = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<10 { group.addTask { try await http.send(OutboundRequest(url: target)).status } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(answers == Array(repeating: 200, count: 10))
        #expect(server.connections == 2)
        await http.shutdown()
        await server.stop()
    }

    @Test("a request waiting for a connection gives up at its deadline")
    func waitingTimesOut() async throws {
        let server = try await ScriptedHTTPServer.start()
        let http = try client(maxConnections: 1)
        let silent = url(server, "/silent")
        // Held for the whole test: a loaded machine once took over 5 s to reach the second
        // request, the first had timed out, and the second got the connection it freed.
        let occupying = Task { try? await http.send(OutboundRequest(url: silent), timeout: .seconds(120)) }
        // Wait until the silent request holds the only connection.
        while server.connections == 0 { await Task.yield() }
        await #expect(throws: HTTPError.timedOut("http://127.0.0.1:\(server.port)/echo")) {
            _ = try await http.send(OutboundRequest(url: url(server, "/echo")), timeout: .milliseconds(200))
        }
        #expect(server.connections == 1, "the waiting request opened no connection of its own")
        occupying.cancel()
        await http.shutdown()
        await server.stop()
    }
}
