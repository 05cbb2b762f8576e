import ATTestbed
import BlueskyTesting
import Foundation
import Testing

@Suite("Testbed server behaviour: counters, failures, HTTP")
struct ServerBehaviourTests {
    @Test("Every XRPC response carries rate-limit headers and requests are counted per NSID")
    func rateLimitHeadersAndCounts() async throws {
        try await TestbedHarness.with { harness in
            let account = await harness.testbed.createAccount(AccountSpec(name: "alice"))
            let tokens = try await harness.login(account)
            let response = try await harness.getSession(tokens.access)
            for name in ["RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit-Policy"] {
                #expect(response.headers.first(name: name) != nil, "missing \(name)")
            }
            let reset = try #require(response.headers.first(name: "RateLimit-Reset").flatMap(Double.init))
            #expect(reset > harness.testbed.now.timeIntervalSince1970)
            _ = try await harness.getSession(tokens.access)
            #expect(harness.testbed.requestCount(nsid: "com.atproto.server.getSession") == 2)
            #expect(harness.testbed.requestCount(nsid: "com.atproto.server.createSession") == 1)
            #expect(harness.testbed.stats(did: account.did).authenticatedCalls == 2)

            harness.testbed.resetCounters()
            #expect(harness.testbed.requestCount(nsid: "com.atproto.server.getSession") == 0)
            #expect(harness.testbed.stats(did: account.did) == AccountStats())
        }
    }

    @Test("Injected failures answer the next calls, then the method works again")
    func injectedFailures() async throws {
        try await TestbedHarness.with { harness in
            let account = await harness.testbed.createAccount(AccountSpec(name: "bob"))
            let tokens = try await harness.login(account)
            harness.testbed.injectFailures(nsid: "com.atproto.server.getSession", status: 503, count: 2)
            for _ in 0..<2 {
                let failed = try await harness.getSession(tokens.access)
                #expect(failed.status == 503)
                #expect(failed.errorName == "InternalServerError")
            }
            #expect(try await harness.getSession(tokens.access).status == 200)

            harness.testbed.injectFailures(nsid: "com.atproto.server.refreshSession", status: 429, count: 1, retryAfterSeconds: 7)
            let limited = try await harness.refresh(tokens.refresh)
            #expect(limited.status == 429)
            #expect(limited.errorName == "RateLimitExceeded")
            #expect(limited.headers.first(name: "Retry-After") == "7")
            #expect(limited.headers.first(name: "RateLimit-Remaining") == "0")
            // The refresh token was not consumed by the refused call.
            #expect(try await harness.refresh(tokens.refresh).status == 200)
            #expect(harness.testbed.requestCount(nsid: "com.atproto.server.getSession") == 3)
        }
    }

    @Test("An unknown NSID is not implemented; a proxied call is counted")
    func unknownMethodAndProxy() async throws {
        try await TestbedHarness.with { harness in
            let account = await harness.testbed.createAccount(AccountSpec(name: "carol"))
            let access = try await harness.login(account).access
            let unknown = try await harness.pds.send(.get("/xrpc/com.example.nothing"))
            #expect(unknown.status == 501)
            #expect(unknown.errorName == "MethodNotImplemented")
            #expect(unknown["message"] == "Method Not Implemented")

            var proxied = TestRequest.get("/xrpc/app.bsky.actor.getProfile?actor=\(account.did)", bearer: access)
            proxied.headers.add(name: "atproto-proxy", value: "did:web:api.bsky.app#bsky_appview")
            #expect(try await harness.pds.send(proxied).status == 200)
            #expect(harness.testbed.proxiedRequestCount(nsid: "app.bsky.actor.getProfile") == 1)
        }
    }

    @Test("Pipelined requests on one keep-alive connection are answered in order")
    func pipelining() async throws {
        try await TestbedHarness.with { harness in
            let account = await harness.testbed.createAccount(AccountSpec(name: "dave"))
            let requests: [TestRequest] = [
                .get("/xrpc/com.atproto.identity.resolveHandle?handle=\(account.handle)"),
                .get("/xrpc/com.example.nothing"),
                .get("/xrpc/com.atproto.server.describeServer"),
            ]
            let responses = try await harness.pds.send(requests + requests)
            #expect(responses.map(\.status) == [200, 501, 200, 200, 501, 200])
            #expect(responses[0]["did"] == account.did)
            #expect(responses[5]["did"] == harness.testbed.pdsDID)
        }
    }

    @Test("shutdown drops keep-alive connections too, so the testbed looks unreachable")
    func shutdownDropsConnections() async throws {
        try await TestbedHarness.with { harness in
            #expect(try await harness.pds.send(.get("/xrpc/com.atproto.server.describeServer")).status == 200)
            try await harness.testbed.shutdown()
            await #expect(throws: (any Error).self) {
                _ = try await harness.pds.send(.get("/xrpc/com.atproto.server.describeServer"))
            }
        }
    }

    @Test("A body larger than the limit is refused with 413")
    func bodyLimit() async throws {
        try await TestbedHarness.with({ $0.maxRequestBodyBytes = 1024 }) { harness in
            let response = try await harness.pds.send(
                TestRequest(.POST, "/xrpc/com.atproto.repo.uploadBlob", body: [UInt8](repeating: 1, count: 4096)))
            #expect(response.status == 413)
        }
    }

    @Test("Many connections in parallel are all served")
    func concurrentConnections() async throws {
        try await TestbedHarness.with { harness in
            let account = await harness.testbed.createAccount(AccountSpec(name: "erin"))
            let testbed = harness.testbed
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<32 {
                    group.addTask {
                        let connection = try await TestHTTPSConnection.open(testbed, host: "pds.tb1.test")
                        let responses = try await connection.send(
                            Array(repeating: .get("/xrpc/com.atproto.identity.resolveHandle?handle=\(account.handle)"), count: 10))
                        await connection.close()
                        return responses.filter { $0.status == 200 }.count
                    }
                }
                return try await group.reduce(0, +)
            }
            #expect(statuses == 320)
            #expect(testbed.requestCount(nsid: "com.atproto.identity.resolveHandle") == 320)
        }
    }

    @Test("startInHermeticNetwork takes a free 127.0.0.N:443 slot named tbN.test", .enabled(if: getuid() == 0))
    func hermeticSlot() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("attestbed-\(UUID().uuidString)").path
        let first = try await Testbed.startInHermeticNetwork(directory: directory)
        try await withTearDown { try? await first.shutdown() } run: {
            let second = try await Testbed.startInHermeticNetwork(directory: directory + "-2")
            try await withTearDown { try? await second.shutdown() } run: {
                #expect(first.configuration.domain != second.configuration.domain)
                for testbed in [first, second] {
                    let slot = try #require(testbed.configuration.domain.wholeMatch(of: /tb(\d+)\.test/)?.output.1)
                    #expect(testbed.configuration.bindAddress == "127.0.0.\(slot)")
                    #expect(testbed.port == 443)
                    #expect(testbed.pdsURL == "https://pds.tb\(slot).test")
                }
            }
        }
    }
}
