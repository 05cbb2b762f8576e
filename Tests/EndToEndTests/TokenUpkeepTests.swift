import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

@Suite("Token upkeep: scheduled refreshes, expiry storms, transient and definitive failures")
struct TokenUpkeepTests {
    @Test("idle accounts are refreshed; 200 concurrent calls across an expiry cause one refresh per account and no reuse")
    func expiryStorm() async throws {
        try await EndToEndFixture.with(accessTokenLifetime: .seconds(2)) { fixture in
            try await fixture.loginAll()
            let testbed = fixture.testbed

            // Idle accounts: nobody calls, yet the PDS sees refreshes (the scheduler's).
            _ = await eventually { fixture.accounts.allSatisfy { testbed.stats(did: $0.did).refreshes >= 2 } }
            for account in fixture.accounts {
                #expect(testbed.stats(did: account.did).refreshes >= 2, "\(account.handle) was refreshed while idle")
            }

            // Jump the server's clock by a whole token lifetime: every token the daemon holds expires
            // at once, in the middle of the traffic that follows.
            testbed.advanceClock(by: .seconds(2))
            let before = fixture.accounts.map { testbed.stats(did: $0.did) }
            let accounts = fixture.accounts
            let outcome = await ConcurrentClients.run(socketPath: fixture.daemon.socketPath, connections: 20,
                                                      requestsPerConnection: 10) { connection, index in
                let account = accounts[(connection + index) % accounts.count]
                return ["nsid": "app.bsky.actor.getProfile", "account": .string(account.did),
                        "params": ["actor": .string(account.did)]]
            }
            #expect(outcome.failures.isEmpty, "\(outcome.failures)")
            #expect(outcome.replies.count == 200)
            let statuses = outcome.replies.map { $0["result"]?["status"]?.intValue ?? -1 }
            #expect(statuses.allSatisfy { $0 == 200 }, "every call succeeded: \(Set(statuses)) \(outcome.replies.first { $0["error"] != nil } ?? nil)")
            for (account, old) in zip(fixture.accounts, before) {
                let now = testbed.stats(did: account.did)
                #expect(now.refreshes - old.refreshes == 1, "\(account.handle): one refresh for the storm, saw \(now.refreshes - old.refreshes)")
                #expect(now.refreshTokenReuses == 0, "\(account.handle): no refresh token presented twice")
                #expect(now.rejectedRefreshes == 0)
            }
        }
    }

    @Test("calls that meet an expired token refresh once between them and each retry once")
    func expiredTokenRetry() async throws {
        // Long-lived tokens, so the daemon has no reason to refresh on its own during the test;
        // then the server's clock jumps past their expiry and every call meets ExpiredToken.
        try await EndToEndFixture.with(accessTokenLifetime: .seconds(600)) { fixture in
            try await fixture.loginAll()
            let testbed = fixture.testbed
            testbed.advanceClock(by: .seconds(601))
            let before = fixture.accounts.map { testbed.stats(did: $0.did) }
            let accounts = fixture.accounts
            let outcome = await ConcurrentClients.run(socketPath: fixture.daemon.socketPath, connections: 20,
                                                      requestsPerConnection: 10) { connection, index in
                let account = accounts[(connection + index) % accounts.count]
                return ["nsid": "app.bsky.feed.getTimeline", "account": .string(account.handle), "params": ["limit": 3]]
            }
            #expect(outcome.failures.isEmpty, "\(outcome.failures)")
            let statuses = outcome.replies.map { $0["result"]?["status"]?.intValue ?? -1 }
            #expect(statuses.count == 200 && statuses.allSatisfy { $0 == 200 }, "every call succeeded after its retry: \(Set(statuses))")
            for (account, old) in zip(fixture.accounts, before) {
                let now = testbed.stats(did: account.did)
                #expect(now.expiredAccessRejections > old.expiredAccessRejections, "\(account.handle): calls met the expired token")
                #expect(now.refreshes - old.refreshes == 1, "\(account.handle): one refresh, saw \(now.refreshes - old.refreshes)")
                #expect(now.refreshTokenReuses == 0 && now.rejectedRefreshes == 0)
            }
        }
    }

    @Test("a 5xx or 429 during refresh keeps the account and retries; a revoked session needs a new login")
    func transientAndDefinitiveFailures() async throws {
        try await EndToEndFixture.with { fixture in
            try await fixture.loginAll()
            let (alice, bob) = (fixture.accounts[0], fixture.accounts[1])
            let testbed = fixture.testbed

            testbed.injectFailures(nsid: "com.atproto.server.refreshSession", status: 503, count: 1)
            let failed = try await fixture.bskyctl(["refresh", alice.handle])
            #expect(failed.status == 1, "a 503 fails this refresh: \(failed.stdout)")
            var listed = try await fixture.listedAccounts()
            #expect(listed[alice.handle]?["state"] == "retrying")
            #expect(listed[alice.handle]?["stateReason"]?.stringValue?.contains("503") == true)
            let stillWorks = try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--param", "actor=\(alice.did)"])
            #expect(stillWorks.status == 0, "the old access token still serves calls: \(stillWorks.stderr)")

            // The account now waits out its backoff: a refresh asked for meanwhile sends nothing and
            // says when the next try is, unless forced.
            let refreshesBefore = testbed.requestCount(nsid: "com.atproto.server.refreshSession")
            let waiting = try await fixture.bskyctl(["refresh", alice.handle])
            #expect(waiting.status == 1 && waiting.stderr.contains("next try is in"), "\(waiting.stderr)")
            #expect(testbed.requestCount(nsid: "com.atproto.server.refreshSession") == refreshesBefore, "no request left")

            testbed.injectFailures(nsid: "com.atproto.server.refreshSession", status: 429, count: 1, retryAfterSeconds: 1)
            #expect(try await fixture.bskyctl(["refresh", alice.handle, "--force"]).status == 1)
            let recovered = try await fixture.bskyctl(["refresh", alice.handle, "--force"])
            #expect(recovered.status == 0, "the next refresh succeeds: \(recovered.stderr)")
            listed = try await fixture.listedAccounts()
            #expect(listed[alice.handle]?["state"] == "active")
            #expect(testbed.stats(did: alice.did).refreshTokenReuses == 0)

            testbed.revokeSessions(did: bob.did)
            let rejected = try await fixture.bskyctl(["refresh", bob.handle])
            #expect(rejected.status == 1)
            #expect(rejected.stderr.lowercased().contains("login"), "the user is told to log in again: \(rejected.stderr)")
            listed = try await fixture.listedAccounts()
            #expect(listed[bob.handle]?["state"] == "needs-login", "the account is kept, marked")
            #expect(listed[bob.handle]?["stateReason"]?.stringValue?.isEmpty == false, "with the server's reason")
            do {
                try await fixture.daemon.call("xrpc.call", ["nsid": "app.bsky.actor.getProfile", "account": .string(bob.did),
                                                      "params": ["actor": .string(bob.did)]])
                Issue.record("a call for a needs-login account must fail")
            } catch let error as RPCError {
                #expect(error.name == "NeedsLogin")
            }
            // And it survives a restart in that state.
            try await fixture.restartDaemon()
            #expect(try await fixture.listedAccounts()[bob.handle]?["state"] == "needs-login")

            // Logging in again mends it in place: the same account, active, working.
            let uuid = try #require(try await fixture.listedAccounts()[bob.handle]?["id"]?.stringValue)
            let relogin = try await fixture.bskyctl(["login", bob.handle, "--app-password"], stdin: bob.appPassword + "\n")
            #expect(relogin.status == 0, "a needs-login account can log in again: \(relogin.stderr)")
            listed = try await fixture.listedAccounts()
            #expect(listed[bob.handle]?["id"]?.stringValue == uuid, "same UUID")
            #expect(listed[bob.handle]?["state"] == "active")
            let call = try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--param", "actor=\(bob.did)",
                                                  "--account", uuid])
            #expect(call.status == 0, "calls work again: \(call.stderr)")
        }
    }
}
