import BlueskyTesting
import DaemonHarness
import Foundation
import JSONRPC
import Testing

/// How often a proxied call for an account whose token is live passes through its
/// connection's event-loop queue: each pass is one job the loop runs, a resumption of the
/// call's async code (debug builds count them: `daemon.status` `debug.loopJobs`). Counted, not
/// timed, so that the call path cannot grow hops unnoticed: every front and account kind is
/// held to one in and one out (docs/PERFORMANCE.md, "What a call costs").
@Suite("Hops of a proxied call with a live token, counted per front and account kind")
struct CallHopTests {
    /// Calls per batch: the per-call count is the difference of batches of 2n and n calls on a
    /// fresh connection each, which cancels what a connection and the counter's reads cost.
    static let calls = 40
    /// The most loop jobs a call may take, per front: the lean path's target (issue 28), one in
    /// (the request read) and one out (the answer written by the call's own task). Before: 6 on
    /// JSON-RPC and 4 on the gateway, with a hop to the account's actor and back per call, a task
    /// per request that waited for the loop to start it, and the writer task's wake-up.
    static let ceilings: [String: Double] = ["json-rpc": 2, "gateway": 2]

    @Test("a live token's call takes no more loop jobs than measured: xrpc.call and /xrpc/ for app-password and OAuth accounts, http.call and /http/ for an OAuth 2.0 account")
    func hopsPerCall() async throws {
        try await EndToEndFixture.with(names: ["alice", "bob"], logLevel: "info") { fixture in
            let (alice, bob, testbed) = (fixture.accounts[0], fixture.accounts[1], fixture.testbed)
            let login = try await fixture.bskyctl(["login", alice.handle, "--app-password"], stdin: alice.appPassword + "\n")
            try #require(login.status == 0, "\(login.stderr)")
            try await fixture.loginWithBskyctl(bob.handle, browser: fixture.browser)
            testbed.addMastodonUser(username: "carol", displayName: "Carol C")
            _ = try await OAuth2AccountTests.login(fixture, testbed.mastodonURL)
            let carol = "carol@" + (URL(string: testbed.mastodonURL)?.host ?? "")

            var counted: [String: Double] = [:]
            for (kind, did) in [("app-password", alice.did), ("oauth", bob.did)] {
                let params: JSONValue = ["nsid": "app.bsky.actor.getProfile", "account": .string(did), "params": ["actor": .string(did)]]
                counted["json-rpc \(kind)"] = try await Self.jobsPerCall(fixture) { n in
                    try await Self.rpcCalls(fixture, "xrpc.call", params, count: n)
                }
                counted["gateway \(kind)"] = try await Self.jobsPerCall(fixture) { n in
                    try await Self.gatewayCalls(fixture, "/xrpc/app.bsky.actor.getProfile?actor=\(did)",
                                                headers: ["atproto-account: \(did)"], count: n)
                }
            }
            let path = "/api/v1/accounts/verify_credentials"
            counted["json-rpc oauth2"] = try await Self.jobsPerCall(fixture) { n in
                try await Self.rpcCalls(fixture, "http.call", ["account": .string(carol), "method": "GET", "path": .string(path)], count: n)
            }
            counted["gateway oauth2"] = try await Self.jobsPerCall(fixture) { n in
                try await Self.gatewayCalls(fixture, "/http/\(carol)\(path)", headers: [], count: n)
            }
            print("loop jobs per call: " + counted.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
            for (name, jobs) in counted {
                let ceiling = try #require(Self.ceilings[String(name.prefix { $0 != " " })])
                // A connection's last jobs may fall either side of a counter's read: a few hundredths.
                #expect(jobs >= 1 && jobs <= ceiling + 0.2, "\(name): \(jobs) loop jobs per call, at most \(ceiling)")
            }
        }
    }

    /// Loop jobs per call of `run`, from batches of `calls` and twice as many.
    static func jobsPerCall(_ fixture: EndToEndFixture, _ run: (Int) async throws -> Void) async throws -> Double {
        // One call first: the account's target is published and the connections to its server open.
        try await run(1)
        let first = try await loopJobs(fixture)
        try await run(calls)
        let second = try await loopJobs(fixture)
        try await run(2 * calls)
        let third = try await loopJobs(fixture)
        return ((third - second) - (second - first)) / Double(calls)
    }

    static func loopJobs(_ fixture: EndToEndFixture) async throws -> Double {
        let status = try await fixture.daemon.call("daemon.status")
        return try #require(status["debug"]?["loopJobs"]?.doubleValue, "a debug build's daemon.status counts loop jobs")
    }

    /// `count` calls one after another on one connection, each answered 200.
    static func rpcCalls(_ fixture: EndToEndFixture, _ method: String, _ params: JSONValue, count: Int) async throws {
        let socketPath = fixture.daemon.socketPath
        let statuses = try await offThePool {
            let connection = try RPCClientConnection(socketPath: socketPath, timeout: .seconds(60))
            defer { connection.close() }
            return try (0..<count).map { _ in try connection.call(method: method, params: params).get()["status"]?.intValue }
        }
        try #require(statuses.allSatisfy { $0 == 200 }, "\(method): \(statuses)")
    }

    /// `count` requests one after another on one keep-alive connection (curl reuses it), each answered 200.
    static func gatewayCalls(_ fixture: EndToEndFixture, _ target: String, headers: [String], count: Int) async throws {
        var arguments = ["--silent", "--show-error", "--max-time", "60", "--unix-socket", fixture.daemon.gatewaySocketPath,
                         "--write-out", "%{http_code} %{num_connects}\n"]
        for header in headers { arguments += ["-H", header] }
        for _ in 0..<count { arguments += ["-o", "/dev/null", "http://localhost" + target] }
        let run = try await CommandResult.run("/usr/bin/curl", arguments)
        let lines = run.stdout.split(separator: "\n")
        try #require(lines.count == count && lines.allSatisfy { $0.hasPrefix("200 ") }, "\(target): \(run.stdout) \(run.stderr)")
        // One connection for them all: only the first request connected.
        try #require(lines.dropFirst().allSatisfy { $0.hasSuffix(" 0") }, "curl kept one connection: \(run.stdout)")
    }
}
