import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

@Suite("Crashes mid-refresh and a replaced store key")
struct CrashRecoveryTests {
    @Test("an OAuth refresh whose answer was lost, then SIGKILL: refreshed once at start, and the loss is explained")
    func lostRefreshThenCrash() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let (alice, testbed) = (fixture.accounts[0], fixture.testbed)
            try await fixture.loginWithBskyctl(alice.handle, browser: fixture.browser)

            // The server rotates the token, but its answer never arrives: the write-ahead mark stays.
            testbed.loseRefreshResponses(count: 1)
            #expect(try await fixture.bskyctl(["refresh", alice.handle]).status == 1)
            let interrupted = try #require(try await fixture.listedAccounts()[alice.handle])
            #expect(interrupted["refreshInterruptedAt"]?.stringValue != nil, "accounts.list shows the interrupted refresh: \(interrupted)")

            try await fixture.restartDaemon(crash: true)
            // At start the marked account is refreshed at once; the spent token is a replay.
            let settled = try await eventually(timeout: .seconds(30)) {
                try await fixture.listedAccounts()[alice.handle]?["state"] == "needs-login"
            }
            #expect(settled, "the account was refreshed at start")
            let entry = try #require(try await fixture.listedAccounts()[alice.handle])
            let reason = entry["stateReason"]?.stringValue ?? ""
            #expect(reason.contains("the refresh in flight when blueskyd stopped (at "), "\(reason)")
            #expect(reason.contains("was lost and the server ended the session: Refresh token replayed"), "\(reason)")
            #expect(entry["refreshInterruptedAt"]?.stringValue != nil)
            #expect(testbed.oauthStats(did: alice.did).refreshTokenReplays == 1, "exactly one retry, at start")
            #expect(fixture.daemon.log.contains("a refresh was in flight when blueskyd stopped"))

            // A new login mends it in place.
            try await fixture.loginWithBskyctl(alice.handle, browser: fixture.browser)
            let mended = try #require(try await fixture.listedAccounts()[alice.handle])
            #expect(mended["state"] == "active" && mended["refreshInterruptedAt"] == .null, "\(mended)")
        }
    }

    @Test("a store key that does not open the store: one line naming the file, exit 78")
    func replacedStoreKey() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            try await fixture.loginAll()
            await fixture.daemon.stop()
            let keyFile = fixture.daemon.stateDirectory + "/store.key"
            var other = [UInt8](repeating: 0, count: 32)
            for index in other.indices { other[index] = UInt8.random(in: 0...255) }
            try Data(other).write(to: URL(fileURLWithPath: keyFile))
            chmod(keyFile, 0o600)
            do {
                try await fixture.restartDaemon()
                Issue.record("blueskyd started with a key that does not open its store")
            } catch DaemonProcessError.exited(let status, let log) {
                #expect(status == 78, "a configuration error: \(log)")
                #expect(log.contains(keyFile) && log.contains("does not open"), "\(log)")
            }
        }
    }

    @Test("SIGTERM during a refresh started by a call waits for it: the rotated tokens are saved, nothing is refreshed again")
    func stopWaitsForCallStartedRefresh() async throws {
        // The refresh answers 12 s after the server rotated: longer than the 5 s a stop gives
        // calls, so only waiting for the refresh itself keeps its answer.
        try await EndToEndFixture.with(names: ["alice"], configureTestbed: { $0.refreshLatency = .seconds(12) }) { fixture in
            try await fixture.loginAll()
            let (alice, testbed) = (fixture.accounts[0], fixture.testbed)
            let nsid = "com.atproto.server.refreshSession"
            async let refresh = fixture.bskyctl(["refresh", alice.handle])
            let sent = await eventually(timeout: .seconds(20)) { testbed.requestCount(nsid: nsid) == 1 }
            try #require(sent, "the refresh reached the PDS")
            let started = ContinuousClock.now
            let status = await fixture.daemon.stop()
            #expect(status == 0, "a clean stop: \(fixture.daemon.log)")
            #expect(ContinuousClock.now - started >= .seconds(10), "the stop waited for the refresh's answer")
            _ = try await refresh
            #expect(testbed.stats(did: alice.did).refreshes == 1)

            try await fixture.restartDaemon()
            let call = try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--param", "actor=\(alice.did)"])
            #expect(call.status == 0, "\(call.stderr)")
            let stats = testbed.stats(did: alice.did)
            #expect(stats.refreshes == 1 && stats.refreshTokenReuses == 0,
                    "the rotated tokens were saved: no refresh at start with the spent token (\(stats))")
        }
    }
}
