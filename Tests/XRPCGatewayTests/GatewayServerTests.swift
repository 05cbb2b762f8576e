import BlueskyHTTP
import BlueskyTesting
import Foundation
import Synchronization
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import RPCServer
import Testing
@testable import XRPCGateway

/// The gateway's server on a real Unix socket, with a handler that says what it got.
@Suite struct GatewayServerTests {
    /// Says what it got: the method, the target, the body's size and how it came, the peer.
    struct Echo: GatewayHandler {
        func respond(to request: GatewayRequest) async -> GatewayResponse {
            var size = 0
            var how = "whole"
            switch request.body {
            case .whole(let body): size = body.readableBytes
            case .streamed where request.uri.hasPrefix("/unread"):
                how = "unread"
            case .streamed(let chunks):
                how = "streamed"
                do {
                    for try await chunk in chunks { size += chunk.readableBytes }
                } catch {
                    how = "broken"
                }
            }
            let text = "\(request.method.rawValue) \(request.uri) \(size) \(how) pid=\(request.peer?.pid ?? -1)"
            if request.uri.hasPrefix("/stream") {
                // An answer of three chunks, read as it is written.
                let parts = Mutex(["one ", "two ", "three"])
                let source = ChunkSource(length: nil) {
                    parts.withLock { $0.isEmpty ? nil : ByteBuffer(string: $0.removeFirst()) }
                }
                return GatewayResponse(status: .ok, headers: [("Content-Type", "text/plain")], streamed: source,
                                       stallTimeout: .seconds(5))
            }
            if request.uri.hasPrefix("/stall") {
                let source = ChunkSource(length: 100) {
                    try await Task.sleep(for: .seconds(60))
                    return nil
                }
                return GatewayResponse(status: .ok, headers: [], streamed: source, stallTimeout: .milliseconds(200))
            }
            return GatewayResponse(status: .ok, headers: [("Content-Type", "text/plain")], body: ByteBuffer(string: text))
        }
    }

    /// Runs `body` against a gateway on a fresh socket, then stops it.
    func withGateway(_ configuration: GatewayServer.Configuration = .init(),
                     _ body: (String) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gw-\(UUID().uuidString.prefix(8))")
        let path = directory.appendingPathComponent("xrpc.sock").path
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = GatewayServer(listener: .unix(.path(path)), configuration: configuration, handler: Echo(),
                                   logger: Logger(label: "test"))
        let running = Task { try await server.run() }
        try await server.waitUntilListening()
        do {
            try await body(path)
        } catch {
            server.shutdownGracefully()
            _ = await running.result
            throw error
        }
        server.shutdownGracefully()
        try await running.value
        #expect(!FileManager.default.fileExists(atPath: path), "the socket file is removed at the stop")
    }

    /// Sends `text` on a new connection and reads until the server closes it.
    func exchange(_ path: String, _ text: String) async throws -> String {
        try await RawHTTPExchange.exchange(socketPath: path, text)
    }

    @Test func answersRequestsOneAfterAnotherOnOneConnection() async throws {
        try await withGateway { path in
            let reply = try await exchange(path, """
                GET /xrpc/a.b.c?x=1 HTTP/1.1\r\nHost: localhost\r\n\r\n\
                POST /xrpc/a.b.d HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello
                """)
            let answers = reply.components(separatedBy: "HTTP/1.1 200 OK").count - 1
            #expect(answers == 2, "\(reply)")
            #expect(reply.contains("GET /xrpc/a.b.c?x=1 0 whole pid=\(getpid())"))
            #expect(reply.contains("POST /xrpc/a.b.d 5 whole pid="))
            #expect(reply.range(of: "GET /xrpc/a.b.c")!.lowerBound < reply.range(of: "POST /xrpc/a.b.d")!.lowerBound)
        }
    }

    @Test func theSocketIsTheOwnersOnly() async throws {
        try await withGateway { path in
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? Int) == 0o600)
        }
    }

    @Test func aWebPagesRequestIsRefusedAndTheConnectionEnds() async throws {
        try await withGateway { path in
            // Keep-alive asked for, and a second request behind: neither is served.
            let reply = try await exchange(path, """
                POST /xrpc/com.atproto.repo.deleteRecord HTTP/1.1\r\nHost: localhost\r\nOrigin: https://evil.example\r\n\
                Content-Length: 2\r\n\r\n{}GET /xrpc/a.b.c HTTP/1.1\r\nHost: localhost\r\n\r\n
                """)
            #expect(reply.hasPrefix("HTTP/1.1 403 Forbidden"), "\(reply)")
            #expect(reply.contains("\"error\":\"BrowserRequestRefused\""))
            #expect(!reply.contains("200 OK"))
        }
    }

    @Test func anotherUserIsRefused() async throws {
        // The test runs as one user; a gateway that serves another stands in for a caller of
        // another uid (the kernel's peer credentials are the same either way).
        try await withGateway(.init(allowedUID: UInt32(getuid()) + 1)) { path in
            let reply = try await exchange(path, "GET /xrpc/a.b.c HTTP/1.1\r\nHost: localhost\r\n\r\n")
            #expect(reply.hasPrefix("HTTP/1.1 403 Forbidden"), "\(reply)")
            #expect(reply.contains("\"error\":\"PermissionDenied\""))
        }
    }

    @Test func largeOrChunkedBodiesStreamToTheHandlerAndTheConnectionGoesOn() async throws {
        try await withGateway(.init(wholeBodyLimit: 10)) { path in
            let reply = try await exchange(path, """
                POST /xrpc/a.b.c HTTP/1.1\r\nHost: localhost\r\nContent-Length: 11\r\n\r\nhello world\
                POST /xrpc/a.b.d HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n\
                6\r\nhello \r\n6\r\nworld!\r\n0\r\n\r\n\
                POST /xrpc/a.b.e HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nConnection: close\r\n\r\nsmall
                """)
            #expect(reply.contains("POST /xrpc/a.b.c 11 streamed"), "\(reply)")
            #expect(reply.contains("POST /xrpc/a.b.d 12 streamed"), "\(reply)")
            #expect(reply.contains("POST /xrpc/a.b.e 5 whole"), "\(reply)")
        }
    }

    @Test func aStreamedBodyTheHandlerDidNotReadEndsTheConnectionAfterItsAnswer() async throws {
        try await withGateway(.init(wholeBodyLimit: 4)) { path in
            let reply = try await exchange(path, """
                POST /unread HTTP/1.1\r\nHost: localhost\r\nContent-Length: 11\r\n\r\nhello worldGET /xrpc/a.b.c HTTP/1.1\r\nHost: localhost\r\n\r\n
                """)
            #expect(reply.hasPrefix("HTTP/1.1 200 OK"), "\(reply)")
            #expect(reply.lowercased().contains("connection: close"))
            #expect(!reply.contains("GET /xrpc/a.b.c"), "the bytes left of the body are never read as a request")
        }
    }

    @Test func aStreamedAnswerIsWrittenAsItComesAndAStalledOneIsCutOff() async throws {
        try await withGateway { path in
            let streamed = try await exchange(path, "GET /stream HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            #expect(streamed.lowercased().contains("transfer-encoding: chunked"), "\(streamed)")
            #expect(streamed.contains("one ") && streamed.contains("two ") && streamed.contains("three"))
            let started = ContinuousClock.now
            let stalled = try await exchange(path, "GET /stall HTTP/1.1\r\nHost: localhost\r\n\r\n")
            #expect(stalled.hasPrefix("HTTP/1.1 200 OK") && stalled.lowercased().contains("content-length: 100"), "\(stalled)")
            // Half the stall: what tells a cut-off from a wait for the whole stall, on a machine
            // however loaded (a 5-s bound was missed at 8 s with the unit suites in parallel).
            #expect(ContinuousClock.now - started < .seconds(30), "cut off after 200 ms of silence, not after the 60 s stall")
        }
    }

    @Test func garbageEndsOnlyItsOwnConnection() async throws {
        try await withGateway { path in
            let garbage = try await exchange(path, "\u{1}\u{2} not http at all\r\n\r\n")
            #expect(garbage.hasPrefix("HTTP/1.1 400 Bad Request") || garbage.isEmpty, "\(garbage)")
            let next = try await exchange(path, "GET /xrpc/a.b.c HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            #expect(next.hasPrefix("HTTP/1.1 200 OK"), "\(next)")
        }
    }
}
