import BlueskyHTTP
import BlueskyTesting
import Foundation
import Testing

@Suite("Outbound URL policy")
struct HTTPPolicyTests {
    @Test("https is always allowed; plain http only to loopback, and only when configured")
    func plainHTTP() throws {
        let strict = HTTPPolicy()
        let development = HTTPPolicy(allowInsecureLoopback: true)
        for url in ["https://pds.example.com/xrpc/x", "https://127.0.0.1:8443/"] {
            #expect(throws: Never.self) { try strict.check(URL(string: url)!) }
        }
        for url in ["http://127.0.0.1:2583/", "http://localhost:2583/", "http://[::1]:2583/"] {
            #expect(throws: HTTPError.insecureURL(url)) { try strict.check(URL(string: url)!) }
            #expect(throws: Never.self) { try development.check(URL(string: url)!) }
        }
        for url in ["http://pds.example.com/", "http://127.0.0.1.evil.example/", "http://10.0.0.1/", "ftp://127.0.0.1/"] {
            #expect(throws: HTTPError.insecureURL(url)) { try development.check(URL(string: url)!) }
        }
    }

    @Test("an unreachable server is a transient failure naming the URL, without its query")
    func unreachable() async throws {
        let http = try OutboundHTTP(.init(connectTimeout: .seconds(2)))
        await withTearDown { try? await http.shutdown() } run: {
            // Port 9 on loopback: nothing listens there, so the connection is refused at once.
            do throws(HTTPError) {
                _ = try await http.send(OutboundRequest(url: URL(string: "https://127.0.0.1:9/xrpc/a.b.c?secret=1")!))
                Issue.record("nothing listens on port 9")
            } catch {
                #expect(error.isTransient)
                #expect(error.description.contains("https://127.0.0.1:9/xrpc/a.b.c"))
                #expect(!error.description.contains("secret"))
            }
        }
    }
}
