import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

@Suite("OAuth accounts over time: refreshes, expiry storms, restarts, logout, upgrades")
struct OAuthUpkeepTests {
    @Test("2-second tokens: idle OAuth accounts are refreshed by the scheduler, without replay")
    func idleRefreshes() async throws {
        try await EndToEndFixture.with(configureTestbed: { $0.oauthAccessTokenLifetime = .seconds(2) }) { fixture in
            let browser = fixture.browser
            let testbed = fixture.testbed
            for account in fixture.accounts { _ = try await fixture.oauthLogin(account.handle, browser: browser) }
            _ = await eventually { fixture.accounts.allSatisfy { testbed.oauthStats(did: $0.did).refreshes >= 3 } }
            for account in fixture.accounts {
                let stats = testbed.oauthStats(did: account.did)
                #expect(stats.refreshes >= 3, "\(account.handle) was refreshed while idle")
                #expect(stats.refreshTokenReplays == 0 && stats.invalidGrants == 0)
                #expect(testbed.oauthSessionCount(did: account.did) == 1)
            }
            let call = try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--param", "actor=\(fixture.accounts[0].did)"])
            #expect(call.status == 0, "\(call.stderr)")
        }
    }

    @Test("200 concurrent calls across an expiry cause one refresh per account and no replay")
    func expiryStorm() async throws {
        // Tokens long enough that the scheduler stays out of the way; then the server's clock
        // jumps past their expiry and every call meets invalid_token. (With 2-second tokens, a
        // scheduled refresh in flight across the jump would hand out a token already expired.)
        try await EndToEndFixture.with(configureTestbed: { $0.oauthAccessTokenLifetime = .seconds(60) }) { fixture in
            let browser = fixture.browser
            let testbed = fixture.testbed
            for account in fixture.accounts { _ = try await fixture.oauthLogin(account.handle, browser: browser) }

            // Every token the daemon holds expires at once, in the middle of the traffic.
            testbed.advanceClock(by: .seconds(61))
            let before = fixture.accounts.map { testbed.oauthStats(did: $0.did) }
            let accounts = fixture.accounts
            let outcome = await ConcurrentClients.run(socketPath: fixture.daemon.socketPath, connections: 20,
                                                      requestsPerConnection: 10) { connection, index in
                let account = accounts[(connection + index) % accounts.count]
                return ["nsid": "app.bsky.actor.getProfile", "account": .string(account.did), "params": ["actor": .string(account.did)]]
            }
            #expect(outcome.failures.isEmpty, "\(outcome.failures)")
            let statuses = outcome.replies.map { $0["result"]?["status"]?.intValue ?? -1 }
            #expect(statuses.count == 200 && statuses.allSatisfy { $0 == 200 },
                    "every call succeeded: \(Set(statuses)) \(outcome.replies.first { $0["result"]?["status"]?.intValue != 200 } ?? nil)")
            for (account, old) in zip(fixture.accounts, before) {
                let now = testbed.oauthStats(did: account.did)
                #expect(now.refreshes - old.refreshes == 1, "\(account.handle): one refresh for the storm, saw \(now.refreshes - old.refreshes)")
                #expect(now.refreshTokenReplays == 0 && now.invalidGrants == 0, "\(account.handle): no replay")
                // The jump is a clock step: a proof signed just before the daemon saw it may be refused
                // as too old, once; it is signed again with the Date header's time.
                #expect(Set(now.dpopRejections.keys).isSubset(of: ["DPoP proof too old"]) && now.totalDPoPRejections <= 2,
                        "\(now.dpopRejections)")
                #expect(now.invalidTokenRejections > old.invalidTokenRejections, "the calls met the expired token")
                #expect(testbed.oauthSessionCount(did: account.did) == 1)
            }
        }
    }

    @Test("an hour of simulated time with a steady stream of calls: refreshes keep up, about one nonce challenge per rotation")
    func hoursOfCalls() async throws {
        try await EndToEndFixture.with(names: ["alice"], configureTestbed: {
            $0.oauthAccessTokenLifetime = .seconds(300)
        }) { fixture in
            let browser = fixture.browser
            let testbed = fixture.testbed
            let alice = fixture.accounts[0]
            _ = try await fixture.oauthLogin(alice.handle, browser: browser)
            let start = testbed.oauthStats(did: alice.did)
            // An hour of simulated time in 2-second steps (a nonce rotation every 60 s, a token every
            // 300 s), two calls at each step. The server's clock runs ahead of the daemon's all along:
            // the proofs' iat follow it through the Date headers (the median of the last samples, so
            // the steps must stay well under the servers' 10-second tolerance).
            var rotations = 0
            for step in 1...1800 {
                testbed.advanceClock(by: .seconds(2))
                if step % 30 == 0 { rotations += 1 }
                for _ in 0..<2 {
                    let reply = try await fixture.daemon.call("xrpc.call", ["nsid": "app.bsky.actor.getProfile", "account": .string(alice.did),
                                                                           "params": ["actor": .string(alice.did)]])
                    #expect(reply["status"] == 200, "\(reply)")
                }
            }
            let end = testbed.oauthStats(did: alice.did)
            #expect(end.refreshes - start.refreshes >= 11, "about one refresh per token lifetime: \(end.refreshes - start.refreshes)")
            #expect(end.refreshTokenReplays == 0 && end.totalDPoPRejections == 0, "\(end.dpopRejections)")
            let challenges = end.pdsNonceChallenges - start.pdsNonceChallenges
            #expect(challenges <= rotations + 1, "at most one PDS challenge per rotation: \(challenges) for \(rotations)")
            #expect(end.authenticatedResourceCalls - start.authenticatedResourceCalls >= 3600)
        }
    }

    @Test("a restart keeps OAuth accounts working; logout revokes; an app-password account upgraded to OAuth keeps its id")
    func restartLogoutUpgrade() async throws {
        try await EndToEndFixture.with { fixture in
            let browser = fixture.browser
            let testbed = fixture.testbed
            let (alice, bob) = (fixture.accounts[0], fixture.accounts[1])

            // bob starts with an app password and is the default.
            let passwordLogin = try await fixture.bskyctl(["login", bob.handle, "--app-password"], stdin: bob.appPassword + "\n")
            try #require(passwordLogin.status == 0, "\(passwordLogin.stderr)")
            let bobBefore = try #require(try await fixture.listedAccounts()[bob.handle])
            #expect(bobBefore["auth"] == "app-password" && bobBefore["isDefault"] == true)

            _ = try await fixture.oauthLogin(alice.handle, browser: browser)
            let upgraded = try await fixture.oauthLogin(bob.handle, browser: browser, extra: ["account": .string(bob.handle)])
            #expect(upgraded["account"]?["id"] == bobBefore["id"], "same UUID after the upgrade")
            #expect(upgraded["account"]?["auth"] == "oauth")
            #expect(upgraded["account"]?["isDefault"] == true, "still the default")

            try await fixture.restartDaemon()
            for account in [alice, bob] {
                let before = testbed.oauthStats(did: account.did)
                let call = try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--account", account.handle,
                                                      "--param", "actor=\(account.did)"])
                #expect(call.status == 0, "\(account.handle) works after the restart: \(call.stderr)")
                #expect(testbed.oauthStats(did: account.did).authenticatedResourceCalls > before.authenticatedResourceCalls)
            }
            let refreshed = try await fixture.bskyctl(["refresh", alice.handle])
            #expect(refreshed.status == 0, "the stored key and endpoints refresh after a restart: \(refreshed.stderr)")
            #expect(testbed.oauthStats(did: alice.did).pdsNonceChallenges <= 2, "the persisted nonces were reused")

            let logout = try await fixture.daemon.call("accounts.remove", ["account": .string(alice.handle)])
            #expect(logout["serverSessionEnded"] == true, "both revocations were accepted")
            #expect(testbed.oauthStats(did: alice.did).revocations >= 1, "the session was revoked")
            #expect(testbed.oauthSessionCount(did: alice.did) == 0, "the testbed confirms the session is gone")
            #expect(try await fixture.listedAccounts()[alice.handle] == nil)
        }
    }
}

@Suite("OAuth refresh failures: transient ones keep the account, invalid_grant keeps the server's reason")
struct OAuthRefreshFailureTests {
    @Test("a 503 at the token endpoint keeps the account; a lost refresh answer then a replay shows 'Refresh token replayed'")
    func refreshFailures() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let browser = fixture.browser
            let testbed = fixture.testbed
            let alice = fixture.accounts[0]
            _ = try await fixture.oauthLogin(alice.handle, browser: browser)

            testbed.injectOAuthFailures(endpoint: .token, status: 503, count: 1)
            let failed = try await fixture.bskyctl(["refresh", alice.handle])
            #expect(failed.status != 0)
            var entry = try #require(try await fixture.listedAccounts()[alice.handle])
            #expect(entry["state"] == "retrying", "a 503 keeps the account: \(entry)")
            let recovered = try await fixture.bskyctl(["refresh", alice.handle, "--force"])
            #expect(recovered.status == 0, "\(recovered.stderr)")
            #expect(try await fixture.listedAccounts()[alice.handle]?["state"] == "active")

            // The server rotates the token but the answer is lost: the daemon still holds the old
            // refresh token, and presenting it again is a replay that ends the session.
            testbed.loseRefreshResponses(count: 1)
            _ = try await fixture.bskyctl(["refresh", alice.handle])
            _ = try await fixture.bskyctl(["refresh", alice.handle, "--force"])
            entry = try #require(try await fixture.listedAccounts()[alice.handle])
            #expect(entry["state"] == "needs-login")
            let reason = entry["stateReason"]?.stringValue ?? ""
            #expect(reason.contains("Refresh token replayed"), "\(entry)")
            #expect(reason.contains("was lost and the server ended the session"), "the reason says what happened: \(reason)")
            let table = try await fixture.bskyctl(["accounts"])
            #expect(table.stdout.contains("Refresh token replayed"), "bskyctl shows the reason: \(table.stdout)")
            #expect(table.stdout.contains("run: bskyctl login \(alice.handle)\n") || table.stdout.hasSuffix("run: bskyctl login \(alice.handle)"),
                    "and the OAuth login to run: \(table.stdout)")
            #expect(testbed.oauthStats(did: alice.did).refreshTokenReplays == 1)
        }
    }
}
