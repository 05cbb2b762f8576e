import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

@Suite("OAuth refreshes against a rate-limited token endpoint")
struct OAuthRateLimitTests {
    @Test("a 429 burst with Retry-After during a scheduled refresh keeps the account retrying, then it recovers without replay")
    func burstDuringScheduledRefresh() async throws {
        try await Self.withFixture { fixture in
            let browser = fixture.browser
            let testbed = fixture.testbed
            let alice = fixture.accounts[0]
            try await fixture.loginWithBskyctl(alice.handle, browser: browser)
            // The scheduler refreshes a second before the 4-second token expires, 3 s from now.
            testbed.injectOAuthFailures(endpoint: .token, status: 429, count: 2, retryAfterSeconds: 1)

            var states: [String] = []
            var reasons: Set<String> = []
            let recovered = try await eventually(timeout: .seconds(30)) {
                let entry = try await fixture.listedAccounts()[alice.handle]
                let state = entry?["state"]?.stringValue ?? "missing"
                if states.last != state { states.append(state) }
                if let reason = entry?["stateReason"]?.stringValue { reasons.insert(reason) }
                return testbed.pendingOAuthFailures(endpoint: .token) == 0 && state == "active"
                    && testbed.oauthStats(did: alice.did).refreshes >= 1
            }
            #expect(recovered, "the account is refreshed once the burst is over: \(states)")
            #expect(states.contains("retrying") && !states.contains("needs-login"), "rate limiting is not a lost session: \(states)")
            #expect(reasons.contains { $0.contains("429") }, "the reason names the rate limit: \(reasons)")

            // Every attempt was the scheduler's: two refused, then one that rotated the tokens.
            let refreshes = testbed.authorizationServerRequests.filter { $0.purpose == "token refresh_token" }
            #expect(refreshes.prefix(3).map { $0.status ?? 0 } == [429, 429, 200], "\(refreshes.map { $0.status ?? 0 })")
            let stats = testbed.oauthStats(did: alice.did)
            #expect(stats.refreshTokenReplays == 0 && stats.invalidGrants == 0 && stats.sessionsDeletedByReplay == 0)
            #expect(testbed.oauthSessionCount(did: alice.did) == 1)
            let call = try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--param", "actor=\(alice.did)"])
            #expect(call.status == 0, "calls work with the rotated tokens: \(call.stderr)")
        }
    }

    @Test("the retry after a 429 waits at least as long as its Retry-After asks")
    func retryAfterIsHonoured() async throws {
        try await Self.withFixture { fixture in
            let browser = fixture.browser
            let testbed = fixture.testbed
            let alice = fixture.accounts[0]
            try await fixture.loginWithBskyctl(alice.handle, browser: browser)
            // The backoff alone would retry after about a second; the server asks for three.
            testbed.injectOAuthFailures(endpoint: .token, status: 429, count: 1, retryAfterSeconds: 3)

            let retried = await eventually(timeout: .seconds(20)) {
                testbed.authorizationServerRequests.filter { $0.purpose == "token refresh_token" }.count >= 2
            }
            #expect(retried, "the scheduler retried the refresh")
            let refreshes = testbed.authorizationServerRequests.filter { $0.purpose == "token refresh_token" }
            try #require(refreshes.count >= 2 && refreshes[0].status == 429)
            let waited = refreshes[1].receivedAt.timeIntervalSince(refreshes[0].receivedAt)
            #expect(waited >= 2.9, "the next attempt came \(waited) s after a 429 asking for 3 s")
            #expect(testbed.oauthStats(did: alice.did).refreshTokenReplays == 0)
        }
    }

    /// One account, 4-second OAuth tokens (refreshed by the scheduler 1 s before they expire) and
    /// a 1-second first retry, so a burst plays out in seconds.
    static func withFixture(_ body: (EndToEndFixture) async throws -> Void) async throws {
        let settings = try TemporaryDirectory("blueskyd-oauth-429")
        defer { settings.remove() }
        let config = settings.file("blueskyd.toml")
        try "retry_initial_seconds = 1\n".write(toFile: config, atomically: true, encoding: .utf8)
        try await EndToEndFixture.with(names: ["alice"], daemonArguments: ["--config", config],
                                       configureTestbed: { $0.oauthAccessTokenLifetime = .seconds(4) }, body)
    }
}
