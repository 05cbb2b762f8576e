import BlueskyHTTP
import Dispatch
import Foundation
import NIOCore
import NIOPosix
import Testing

/// A kept connection that the server closes under a request: the request goes out again only
/// when that cannot make the server act on it twice. Counts come from the server.
@Suite("The keep-alive client's retry after a dropped connection")
struct KeepAliveRetryTests {
    private static let createRecord = "/xrpc/com.atproto.repo.createRecord"
    private static let record = #"{"repo":"did:plc:alice","collection":"app.bsky.feed.post","record":{"text":"hi"}}"#

    private func client(group: MultiThreadedEventLoopGroup = .singleton) throws -> KeepAliveHTTPClient {
        try KeepAliveHTTPClient(.init(policy: HTTPPolicy(allowInsecureLoopback: true)), group: group)
    }

    private func url(_ server: ScriptedHTTPServer, _ target: String) -> URL {
        URL(string: "http://127.0.0.1:\(server.port)\(target)")!
    }

    private func createRecord(_ server: ScriptedHTTPServer) -> OutboundRequest {
        OutboundRequest(method: "POST", url: url(server, Self.createRecord),
                        headers: [("Content-Type", "application/json")], body: Array(Self.record.utf8))
    }

    private func text(_ response: InboundResponse) -> String { String(decoding: response.body, as: UTF8.self) }

    @Test("a createRecord the server read and then dropped unanswered is not sent again, and fails clearly")
    func procedureMayHaveBeenReceived() async throws {
        let server = try await ScriptedHTTPServer.start()
        let http = try client()
        #expect(text(try await http.send(OutboundRequest(url: url(server, "/swallow-next")))) == "ok")
        do {
            let response = try await http.send(createRecord(server))
            Issue.record("a dropped createRecord was answered: \(response.status) \(text(response))")
        } catch {
            #expect(error == .mayHaveBeenReceived(url(server, Self.createRecord).absoluteString))
            #expect(!error.isTransient, "an automatic retry later could create the record twice")
        }
        #expect(server.receipts("POST", Self.createRecord) == 1)
        #expect(server.connections == 1, "no second connection was opened for it")
        await http.shutdown()
        await server.stop()
    }

    @Test("a query the server read and then dropped unanswered goes to a new connection and is answered")
    func queryIsSentAgain() async throws {
        let server = try await ScriptedHTTPServer.start()
        let http = try client()
        let target = "/xrpc/app.bsky.feed.getTimeline?limit=1"
        #expect(text(try await http.send(OutboundRequest(url: url(server, "/swallow-next")))) == "ok")
        let response = try await http.send(OutboundRequest(url: url(server, target)))
        #expect(text(response) == "GET \(target) 2 ")
        #expect(server.receipts("GET", target) == 2)
        #expect(server.connections == 2)
        await http.shutdown()
        await server.stop()
    }

    @Test("a reset after the request was read: a query is answered from a new connection, a createRecord fails")
    func resetIsJudgedLikeAClose() async throws {
        let server = try await ScriptedHTTPServer.start()
        let http = try client()
        let target = "/xrpc/app.bsky.actor.getProfile?actor=alice"
        #expect(text(try await http.send(OutboundRequest(url: url(server, "/reset-next")))) == "ok")
        #expect(text(try await http.send(OutboundRequest(url: url(server, target)))) == "GET \(target) 2 ")
        #expect(server.receipts("GET", target) == 2)

        #expect(text(try await http.send(OutboundRequest(url: url(server, "/reset-next")))) == "ok")
        await #expect(throws: HTTPError.mayHaveBeenReceived(url(server, Self.createRecord).absoluteString)) {
            _ = try await http.send(createRecord(server))
        }
        #expect(server.receipts("POST", Self.createRecord) == 1)
        #expect(server.connections == 2)
        await http.shutdown()
        await server.stop()
    }

    @Test("a createRecord meant for a connection the server had already closed goes to a new one, once")
    func unsentProcedureIsSentOnce() async throws {
        let server = try await ScriptedHTTPServer.start()
        // One loop of its own, which the test holds so that the close is still unread when the
        // request is about to be written on the kept connection.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let http = try client(group: group)
        #expect(text(try await http.send(OutboundRequest(url: url(server, "/hold")))) == "ok")

        let gate = DispatchSemaphore(value: 0)
        await withCheckedContinuation { (entered: CheckedContinuation<Void, Never>) in
            loop.execute {
                entered.resume()
                gate.wait()
            }
        }
        let clientPorts = await server.closeHeld()
        #expect(clientPorts.count == 1)
        let closeArrived = await Self.waitForCloseWait(clientPort: clientPorts.first ?? 0, serverPort: server.port)
        #expect(closeArrived, "the client's kernel never saw the server's close")
        // Queued on the held loop now, so it runs before the loop reads the close.
        let call = Task(executorPreference: LoopExecutor(loop)) { () async throws(HTTPError) -> InboundResponse in
            try await http.send(createRecord(server))
        }
        gate.signal()

        let response = try await call.value
        #expect(text(response) == "POST \(Self.createRecord) 2 \(Self.record)")
        #expect(server.receipts("POST", Self.createRecord) == 1)
        #expect(server.connections == 2)
        await http.shutdown()
        try await group.shutdownGracefully()
        await server.stop()
    }

    /// Waits until the client's end of the connection from `clientPort` to `serverPort` holds
    /// the server's FIN (TCP state CLOSE_WAIT in /proc/net/tcp); false after 10 seconds.
    private static func waitForCloseWait(clientPort: Int, serverPort: Int) async -> Bool {
        let local = "0100007F:" + hex(clientPort)
        let remote = "0100007F:" + hex(serverPort)
        let end = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < end {
            let table = FileHandle(forReadingAtPath: "/proc/net/tcp").flatMap { try? $0.readToEnd() } ?? Data()
            for line in String(decoding: table, as: UTF8.self).split(separator: "\n") {
                let fields = line.split(separator: " ")
                if fields.count > 3, fields[1] == local, fields[2] == remote, fields[3] == "08" { return true }
            }
            // Polls a kernel state, not a race: a short pause keeps it from taking a whole CPU.
            try? await Task.sleep(for: .milliseconds(2))
        }
        return false
    }

    private static func hex(_ port: Int) -> String {
        let digits = String(port, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}

/// Runs a task's jobs on one event loop, as the daemon runs a local call's.
private final class LoopExecutor: TaskExecutor, @unchecked Sendable {
    let loop: any EventLoop

    init(_ loop: any EventLoop) { self.loop = loop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
