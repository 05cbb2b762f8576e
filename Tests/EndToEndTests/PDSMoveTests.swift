import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

@Suite("Accounts that move to another PDS: followed when the issuer stays, a new login when it changes")
struct PDSMoveTests {
    @Test("the old PDS refuses the token; blueskyd reads the DID document again and makes the call at the new PDS")
    func followsTheAccountToItsNewPDS() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let browser = fixture.browser
            let (alice, testbed) = (fixture.accounts[0], fixture.testbed)
            _ = try await fixture.oauthLogin(alice.did, browser: browser)
            let profile = ["proxy", "app.bsky.actor.getProfile", "--param", "actor=\(alice.did)"]
            #expect(try await fixture.bskyctl(profile).status == 0)

            testbed.movePDS(did: alice.did)
            let refusedBefore = testbed.oauthStats(did: alice.did).invalidTokenRejections
            let refreshesBefore = testbed.oauthStats(did: alice.did).refreshes
            let call = try await fixture.bskyctl(profile)
            #expect(call.status == 0, "the call reaches the account at its new PDS: \(call.stderr)")
            #expect(testbed.stats(did: alice.did).deactivatedRejections == 1,
                    "the PDS it left answered AccountDeactivated once, as the reference PDS does")
            #expect(testbed.oauthStats(did: alice.did).invalidTokenRejections == refusedBefore)
            #expect(testbed.oauthStats(did: alice.did).refreshes == refreshesBefore, "a valid token is not refreshed for a move")
            let entry = try #require(try await fixture.listedAccounts()[alice.handle])
            #expect(entry["pds"]?.stringValue == testbed.pdsAliasURL)
            #expect(entry["state"] == "active")

            // Remembered: after a restart the calls go straight to the new PDS.
            try await fixture.restartDaemon()
            let refusedAfterMove = testbed.oauthStats(did: alice.did).invalidTokenRejections
            #expect(try await fixture.bskyctl(profile).status == 0)
            #expect(testbed.oauthStats(did: alice.did).invalidTokenRejections == refusedAfterMove)
        }
    }

    @Test("a move to a PDS whose authorization server did not grant the session: needs a new login, with the reason")
    func moveToAnotherIssuerNeedsLogin() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let browser = fixture.browser
            let (alice, testbed) = (fixture.accounts[0], fixture.testbed)
            _ = try await fixture.oauthLogin(alice.did, browser: browser)
            testbed.setAliasPDSNamesRogueIssuer(true)
            testbed.movePDS(did: alice.did)

            let refresh = try await fixture.bskyctl(["refresh", alice.handle])
            #expect(refresh.status == 0, "the refresh itself works: the old issuer still has the session: \(refresh.stderr)")
            let entry = try #require(try await fixture.listedAccounts()[alice.handle])
            #expect(entry["state"] == "needs-login")
            #expect(entry["stateReason"]?.stringValue?.contains("moved to \(testbed.pdsAliasURL)") == true, "\(entry)")
            #expect(entry["pds"]?.stringValue == testbed.pdsURL, "the session's PDS is not switched to an issuer it did not come from")
            let call = try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--param", "actor=\(alice.did)"])
            #expect(call.status == 1 && call.stderr.contains("log in again"), "\(call.stderr)")
        }
    }

    @Test("the new PDS failing while blueskyd checks its issuer keeps the account: a later look follows the move")
    func outageDuringTheCheckKeepsTheAccount() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let (alice, testbed) = (fixture.accounts[0], fixture.testbed)
            _ = try await fixture.oauthLogin(alice.did, browser: fixture.browser)
            testbed.movePDS(did: alice.did)
            testbed.injectOAuthFailures(endpoint: .protectedResourceMetadata, status: 503, count: 1)

            let refresh = try await fixture.bskyctl(["refresh", alice.handle])
            #expect(refresh.status == 0, "\(refresh.stderr)")
            #expect(testbed.pendingOAuthFailures(endpoint: .protectedResourceMetadata) == 0, "the check met the outage")
            var entry = try #require(try await fixture.listedAccounts()[alice.handle])
            #expect(entry["state"] == "active", "an unreachable server is no verdict on the session: \(entry)")
            #expect(entry["pds"]?.stringValue == testbed.pdsURL, "not moved yet")

            #expect(try await fixture.bskyctl(["refresh", alice.handle]).status == 0)
            entry = try #require(try await fixture.listedAccounts()[alice.handle])
            #expect(entry["pds"]?.stringValue == testbed.pdsAliasURL && entry["state"] == "active")
        }
    }

    @Test("many calls refused at once after a move: one look at the DID document, and every call reaches the new PDS")
    func concurrentRefusedCallsShareOneRecheck() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let (alice, testbed) = (fixture.accounts[0], fixture.testbed)
            _ = try await fixture.oauthLogin(alice.did, browser: fixture.browser)
            testbed.movePDS(did: alice.did)
            testbed.resetCounters()
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        let reply = try await fixture.daemon.call("xrpc.call", [
                            "nsid": "app.bsky.actor.getProfile", "account": .string(alice.did), "params": ["actor": .string(alice.did)],
                        ])
                        return reply["status"]?.intValue ?? 0
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 20), "\(statuses)")
            #expect(testbed.requestCount(nsid: Testbed.protectedResourceMetadataKey) == 1,
                    "the new PDS's issuer was looked up once for all 20 calls")
            #expect(try await fixture.listedAccounts()[alice.handle]?["pds"]?.stringValue == testbed.pdsAliasURL)
        }
    }
}
