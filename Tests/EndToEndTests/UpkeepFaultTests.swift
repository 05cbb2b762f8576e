import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

/// Rate limits, refusals that are not verdicts, and moves: one backoff per account whoever asks,
/// and only a definitive answer ends a session.
@Suite("Upkeep against servers that rate-limit, refuse for a while, or say the account moved")
struct UpkeepFaultTests {
    @Test("app password: a 429 with Retry-After, then a burst of 15 calls for the expired account: one refresh request, every call told when")
    func rateLimitedAppPasswordBurst() async throws {
        try await EndToEndFixture.with(names: ["alice"], accessTokenLifetime: .seconds(4)) { fixture in
            try await fixture.loginAll()
            let (alice, testbed) = (fixture.accounts[0], fixture.testbed)
            let nsid = "com.atproto.server.refreshSession"
            testbed.injectFailures(nsid: nsid, status: 429, count: 1, retryAfterSeconds: 120)
            try await waitForScheduledFailure(fixture, alice) { testbed.requestCount(nsid: nsid) >= 1 }

            let errors = try await burstOfCalls(fixture, account: alice, count: 15)
            #expect(testbed.requestCount(nsid: nsid) == 1, "the calls sent no refresh of their own")
            expectToldWhen(errors, atLeast: 100)
            let entry = try #require(try await fixture.listedAccounts()[alice.handle])
            let next = try #require(entry["nextRefreshAt"]?.stringValue.flatMap { try? Date($0, strategy: .iso8601) })
            #expect(next.timeIntervalSinceNow > 100, "the schedule honours the 120 s, not retry_max_seconds")
        }
    }

    @Test("OAuth: a 429 with Retry-After at the token endpoint, then 15 calls for the expired account: one refresh request")
    func rateLimitedOAuthBurst() async throws {
        try await EndToEndFixture.with(names: ["alice"], configureTestbed: { $0.oauthAccessTokenLifetime = .seconds(4) }) { fixture in
            let (alice, testbed) = (fixture.accounts[0], fixture.testbed)
            try await fixture.loginWithBskyctl(alice.handle, browser: fixture.browser)
            testbed.injectOAuthFailures(endpoint: .token, status: 429, count: 1, retryAfterSeconds: 120)
            func refreshRequests() -> Int { testbed.authorizationServerRequests.filter { $0.grantType == "refresh_token" }.count }
            try await waitForScheduledFailure(fixture, alice) { refreshRequests() >= 1 }

            let errors = try await burstOfCalls(fixture, account: alice, count: 15)
            #expect(refreshRequests() == 1, "the calls sent no refresh of their own")
            expectToldWhen(errors, atLeast: 100)
            #expect(testbed.oauthStats(did: alice.did).refreshTokenReplays == 0)

            // A person can still try now; the session was never in danger.
            let forced = try await fixture.bskyctl(["refresh", alice.handle, "--force"])
            #expect(forced.status == 0, "\(forced.stderr)")
            #expect(try await fixture.listedAccounts()[alice.handle]?["state"] == "active")
        }
    }

    @Test("invalid_client, an HTML 502 and a 400 InvalidRequest are no verdicts: the account keeps retrying, then recovers")
    func nonDefinitiveRefusals() async throws {
        try await EndToEndFixture.with(names: ["alice", "bob"]) { fixture in
            let (alice, bob, testbed) = (fixture.accounts[0], fixture.accounts[1], fixture.testbed)
            try await fixture.loginWithBskyctl(alice.handle, browser: fixture.browser)
            let login = try await fixture.bskyctl(["login", bob.handle, "--app-password"], stdin: bob.appPassword + "\n")
            try #require(login.status == 0, "\(login.stderr)")

            for (error, html) in [("invalid_client", false), ("bad_gateway", true)] {
                testbed.injectOAuthFailures(endpoint: .token, status: html ? 502 : 400, count: 1, error: error, html: html)
                let refused = try await fixture.bskyctl(["refresh", alice.handle, "--force"])
                #expect(refused.status == 1)
                let entry = try #require(try await fixture.listedAccounts()[alice.handle])
                #expect(entry["state"] == "retrying", "\(error): \(entry)")
                if !html { #expect(entry["stateReason"]?.stringValue?.contains("invalid_client") == true, "\(entry)") }
            }
            #expect(try await fixture.bskyctl(["refresh", alice.handle, "--force"]).status == 0)
            #expect(try await fixture.listedAccounts()[alice.handle]?["state"] == "active")
            #expect(testbed.oauthSessionCount(did: alice.did) == 1, "the grant was intact all along")

            let nsid = "com.atproto.server.refreshSession"
            for (status, error, html) in [(400, "InvalidRequest", false), (502, "BadGateway", true)] {
                testbed.injectFailures(nsid: nsid, status: status, count: 1, error: error, html: html)
                #expect(try await fixture.bskyctl(["refresh", bob.handle, "--force"]).status == 1)
                #expect(try await fixture.listedAccounts()[bob.handle]?["state"] == "retrying", "\(status) \(error)")
            }
            #expect(try await fixture.bskyctl(["refresh", bob.handle, "--force"]).status == 0)
            #expect(try await fixture.listedAccounts()[bob.handle]?["state"] == "active")
            #expect(testbed.stats(did: bob.did).refreshTokenReuses == 0)
        }
    }

    @Test("an app-password account that migrated: the old PDS answers AccountDeactivated, the account needs a login 'moved to <pds>'")
    func appPasswordMove() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            try await fixture.loginAll()
            let (alice, testbed) = (fixture.accounts[0], fixture.testbed)
            testbed.movePDS(did: alice.did)
            let call = try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--param", "actor=\(alice.did)"])
            #expect(call.status == 1, "\(call.stdout)")
            #expect(call.stderr.contains("moved to \(testbed.pdsAliasURL); log in again"), "\(call.stderr)")
            #expect(testbed.stats(did: alice.did).deactivatedRejections == 1)
            let entry = try #require(try await fixture.listedAccounts()[alice.handle])
            #expect(entry["state"] == "needs-login")
        }
    }

    // MARK: - Helpers

    /// Waits until the scheduled refresh met the injected failure and the access token expired.
    private func waitForScheduledFailure(_ fixture: EndToEndFixture, _ account: TestAccount,
                                         reached: @escaping () -> Bool) async throws {
        let failed = try await eventually(timeout: .seconds(30)) {
            try await fixture.listedAccounts()[account.handle]?["state"] == "retrying" && reached()
        }
        try #require(failed, "the scheduled refresh met the 429")
        let entry = try #require(try await fixture.listedAccounts()[account.handle])
        let expiry = try #require(entry["accessExpiresAt"]?.stringValue.flatMap { try? Date($0, strategy: .iso8601) })
        if expiry > Date() { try await Task.sleep(for: .seconds(expiry.timeIntervalSinceNow + 0.5)) }
    }

    /// `count` concurrent calls for `account`; the errors they got.
    private func burstOfCalls(_ fixture: EndToEndFixture, account: TestAccount, count: Int) async throws -> [RPCError] {
        try await withThrowingTaskGroup(of: RPCError?.self) { group in
            for _ in 0..<count {
                group.addTask {
                    do {
                        _ = try await fixture.daemon.call("xrpc.call", [
                            "nsid": "app.bsky.actor.getProfile", "account": .string(account.did), "params": ["actor": .string(account.did)],
                        ])
                        return nil
                    } catch let error as RPCError {
                        return error
                    }
                }
            }
            return try await group.reduce(into: []) { if let error = $1 { $0.append(error) } }
        }
    }

    private func expectToldWhen(_ errors: [RPCError], atLeast seconds: Int) {
        #expect(errors.count == 15, "every call failed at once")
        for error in errors {
            #expect(error.name == "UpstreamUnavailable")
            #expect((error.data["retryAfter"]?.intValue ?? 0) >= seconds, "\(error.data)")
        }
    }
}
