import BlueskyHTTP
import Foundation
import Testing

/// The logins', refreshes' and lookups' client: one deadline for the whole answer.
@Suite("OutboundHTTP: the deadline covers the head and the whole body")
struct OutboundHTTPTests {
    private func client() throws -> OutboundHTTP {
        try OutboundHTTP(.init(policy: HTTPPolicy(allowInsecureLoopback: true)))
    }

    @Test("an answer that stalls after half its body times out at the deadline, and the client goes on")
    func stalledBody() async throws {
        let server = try await ScriptedHTTPServer.start()
        let http = try client()
        for path in ["/half", "/silent"] {
            let started = ContinuousClock.now
            await #expect(throws: HTTPError.timedOut("http://127.0.0.1:\(server.port)\(path)")) {
                _ = try await http.send(OutboundRequest(url: URL(string: "http://127.0.0.1:\(server.port)\(path)")!),
                                        timeout: .milliseconds(300))
            }
            let took = ContinuousClock.now - started
            // Without a deadline on the body this never returns. The bound is loose: the unit tests
            // share two cores with CPU-bound neighbours (100,000 sealed records, certificates),
            // which have delayed this timer by 6 s.
            #expect(took >= .milliseconds(290) && took < .seconds(30), "\(path): gave up after \(took)")
        }
        let echo = try await http.send(OutboundRequest(url: URL(string: "http://127.0.0.1:\(server.port)/echo")!),
                                       timeout: .seconds(10))
        #expect(echo.status == 200 && String(decoding: echo.body, as: UTF8.self).hasPrefix("GET /echo"))
        try await http.shutdown()
        await server.stop()
    }
}
