import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

/// Servers that answer half and then stall, or answer very late: every outbound exchange has one
/// deadline for its whole answer, `upstream_timeout_seconds` (5 s here), head and body alike.
@Suite("Answers that stall after their head, or come late: one deadline for the whole answer")
struct StalledAnswerTests {
    static let timeout = 5.0
    /// The deadline plus what the daemon and the test's own hops may add after the stalled
    /// exchange began (what came before it, a login's earlier lookups, is not the deadline's).
    static let slack = 1.0
    static func configuration(_: Testbed) -> String { "upstream_timeout_seconds = \(Int(timeout))\n" }

    @Test("a refresh answer that stalls mid-body: both kinds give up within the deadline, other accounts' calls go on")
    func stalledRefreshes() async throws {
        try await EndToEndFixture.with(names: ["alice", "bob", "carol"], daemonConfigFile: Self.configuration) { fixture in
            let (alice, bob, carol, testbed) = (fixture.accounts[0], fixture.accounts[1], fixture.accounts[2], fixture.testbed)
            for account in [alice, carol] {
                let login = try await fixture.bskyctl(["login", account.handle, "--app-password"], stdin: account.appPassword + "\n")
                try #require(login.status == 0, "\(login.stderr)")
            }
            try await fixture.loginWithBskyctl(bob.handle, browser: fixture.browser)

            testbed.shapeAnswers(at: .xrpc("com.atproto.server.refreshSession"), .stallAfterHalfBody(.seconds(120)), count: 1)
            try await expectGivesUp("the app-password refresh", fixture, stalling: .xrpc("com.atproto.server.refreshSession"),
                                    whileCalling: carol) {
                try await fixture.daemon.call("accounts.refresh", ["account": .string(alice.did), "force": true])
            }
            testbed.shapeAnswers(at: .oauth(.token), .stallAfterHalfBody(.seconds(120)), count: 1)
            try await expectGivesUp("the OAuth refresh", fixture, stalling: .oauth(.token), whileCalling: carol) {
                try await fixture.daemon.call("accounts.refresh", ["account": .string(bob.did), "force": true])
            }
            testbed.shapeAnswers(at: .xrpc("app.bsky.actor.getProfile"), .stallAfterHalfBody(.seconds(120)), count: 1)
            try await expectGivesUp("a proxied call", fixture, stalling: .xrpc("app.bsky.actor.getProfile"), whileCalling: carol) {
                try await fixture.daemon.call("xrpc.call", ["nsid": "app.bsky.actor.getProfile", "account": .string(alice.did),
                                                            "params": ["actor": .string(alice.did)]])
            }
            // The app-password session survived its lost answer (the server's grace period).
            let again = try await fixture.daemon.call("accounts.refresh", ["account": .string(alice.did), "force": true])
            #expect(again["account"]?["state"] == "active", "\(again)")
        }
    }

    @Test("logins and identity lookups whose answers stall: each gives up within the deadline")
    func stalledLoginsAndLookups() async throws {
        let names = ["alice", "bob", "carol", "dave", "erin"]
        try await EndToEndFixture.with(names: names, daemonConfigFile: Self.configuration) { fixture in
            let testbed = fixture.testbed
            let (alice, bob, carol, dave, erin) = (fixture.accounts[0], fixture.accounts[1], fixture.accounts[2],
                                                   fixture.accounts[3], fixture.accounts[4])
            let login = try await fixture.bskyctl(["login", erin.handle, "--app-password"], stdin: erin.appPassword + "\n")
            try #require(login.status == 0, "\(login.stderr)")
            // Each account is looked up for the first time here: no cached identity hides the stall.
            for (target, account) in [(AnswerTarget.xrpc("com.atproto.server.createSession"), alice),
                                      (.plc, dave), (.handleWellKnown, bob)] {
                testbed.shapeAnswers(at: target, .stallAfterHalfBody(.seconds(120)), count: 1)
                try await expectGivesUp("an app-password login (\(target))", fixture, stalling: target, whileCalling: erin) {
                    try await fixture.daemon.call("accounts.add", ["identifier": .string(account.handle),
                                                                   "password": .string(account.appPassword)])
                }
                #expect(testbed.pendingShapedAnswers(at: target) == 0, "the stalled answer was served: \(target)")
            }
            for target in [AnswerTarget.oauth(.metadata), .oauth(.pushedAuthorization)] {
                testbed.shapeAnswers(at: target, .stallAfterHalfBody(.seconds(120)), count: 1)
                try await expectGivesUp("an OAuth login's \(target)", fixture, stalling: target, whileCalling: erin) {
                    try await fixture.daemon.call("accounts.oauth.begin", ["identifier": .string(carol.handle)])
                }
                #expect(testbed.pendingShapedAnswers(at: target) == 0, "the stalled answer was served: \(target)")
            }
            // A person's refresh reads the DID document again: a stalled directory costs the
            // deadline and changes nothing.
            let carolLogin = try await fixture.bskyctl(["login", carol.handle, "--app-password"], stdin: carol.appPassword + "\n")
            try #require(carolLogin.status == 0, "\(carolLogin.stderr)")
            testbed.shapeAnswers(at: .plc, .stallAfterHalfBody(.seconds(120)), count: 1)
            try await expectGivesUp("a refresh's identity recheck", fixture, stalling: .plc, whileCalling: erin, mustFail: false) {
                try await fixture.daemon.call("accounts.refresh", ["account": .string(carol.did)])
            }
            #expect(testbed.pendingShapedAnswers(at: .plc) == 0, "the recheck met the stalled directory")
            #expect(try await fixture.listedAccounts()[carol.handle]?["state"] == "active")
        }
    }

    @Test("SIGTERM while a refresh's answer stalls: the daemon stops in under 10 s")
    func stopDuringStall() async throws {
        try await EndToEndFixture.with(names: ["alice"], daemonConfigFile: Self.configuration) { fixture in
            try await fixture.loginAll()
            let alice = fixture.accounts[0]
            fixture.testbed.shapeAnswers(at: .xrpc("com.atproto.server.refreshSession"), .stallAfterHalfBody(.seconds(120)),
                                         count: 1)
            let refresh = Task { try? await fixture.daemon.call("accounts.refresh", ["account": .string(alice.did), "force": true]) }
            try await waitUntil("the stalled answer is served", timeout: .seconds(10)) {
                fixture.testbed.pendingShapedAnswers(at: .xrpc("com.atproto.server.refreshSession")) == 0
            }
            let started = ContinuousClock.now
            let status = await fixture.daemon.stop()
            let took = ContinuousClock.now - started
            _ = await refresh.value
            #expect(status == 0, "\(fixture.daemon.log.suffix(2000))")
            #expect(took < .seconds(10), "the stop took \(took)")
        }
    }

    @Test("an OAuth token endpoint answering after 40 s with upstream_timeout_seconds = 5: the refresh gives up within 11 s")
    func slowTokenEndpoint() async throws {
        try await EndToEndFixture.with(names: ["alice"], daemonConfigFile: Self.configuration) { fixture in
            let alice = fixture.accounts[0]
            try await fixture.loginWithBskyctl(alice.handle, browser: fixture.browser)
            fixture.testbed.shapeAnswers(at: .oauth(.token), .delayed(.seconds(40)), count: 2)
            let started = ContinuousClock.now
            await #expect(throws: (any Error).self) {
                try await fixture.daemon.call("accounts.refresh", ["account": .string(alice.did), "force": true])
            }
            let took = ContinuousClock.now - started
            #expect(took < .seconds(2 * Self.timeout + Self.slack), "gave up after \(took)")
            #expect(took >= .seconds(Self.timeout - 0.5), "waited for the deadline: \(took)")
        }
    }

    // MARK: - Helpers

    /// Runs `operation`, which must end (failing, unless `mustFail` is false) within the
    /// deadline (+ slack) of the moment the testbed began the stalled answer at `target`, while
    /// calls for `bystander` keep answering at their usual pace.
    private func expectGivesUp(_ what: String, _ fixture: EndToEndFixture, stalling target: AnswerTarget,
                               whileCalling bystander: TestAccount,
                               mustFail: Bool = true, _ operation: @escaping @Sendable () async throws -> JSONValue) async throws {
        let started = ContinuousClock.now
        let attempt = Task { () -> (any Error)? in
            do {
                _ = try await operation()
                return nil
            } catch {
                return error
            }
        }
        // Calls for another account are answered meanwhile, each promptly (a method no test
        // stalls, so that the bystander never takes the stalled answer).
        var calls = 0
        while ContinuousClock.now - started < .seconds(Self.timeout - 1) {
            let call = ContinuousClock.now
            let reply = try await fixture.daemon.call("xrpc.call", [
                "nsid": "app.bsky.feed.getTimeline", "account": .string(bystander.did), "params": ["limit": 1],
            ])
            #expect(reply["status"] == 200, "\(what): a call for \(bystander.handle) meanwhile")
            #expect(ContinuousClock.now - call < .seconds(2), "\(what): the call for \(bystander.handle) was not held up")
            calls += 1
            try await Task.sleep(for: .milliseconds(500))
        }
        let failure = await attempt.value
        let ended = ContinuousClock.now
        if mustFail { #expect(failure != nil, "\(what) failed rather than succeeding with half an answer") }
        let stalled = try #require(fixture.testbed.lastShapedAnswerServed(at: target), "\(what): the stalled answer was served")
        let took = ended - stalled
        #expect(took < .seconds(Self.timeout + Self.slack),
                "\(what) gave up \(took) after the stalled answer began (\(ended - started) after the operation began): \(failure.map { "\($0)" } ?? "no error"); the daemon's log: \(fixture.daemon.log.suffix(4000))")
        #expect(calls >= 3, "\(what): calls for another account went on (\(calls))")
    }
}
