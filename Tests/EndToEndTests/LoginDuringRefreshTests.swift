import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Synchronization
import Testing

/// A new login of an account whose refresh is on its way: the login wins, whatever the refresh
/// brings back afterwards.
@Suite("A new login while a refresh is on its way")
struct LoginDuringRefreshTests {
    @Test("an app-password account upgraded to OAuth while its refresh waits on the PDS keeps the OAuth login")
    func upgradeDuringRefresh() async throws {
        // The PDS answers refreshes 3 s after it rotated the tokens.
        try await EndToEndFixture.with(names: ["bob"], configureTestbed: { $0.refreshLatency = .seconds(3) }) { fixture in
            let bob = fixture.accounts[0]
            let login = try await fixture.bskyctl(["login", bob.handle, "--app-password"], stdin: bob.appPassword + "\n")
            try #require(login.status == 0, "\(login.stderr)")
            let before = fixture.testbed.stats(did: bob.did).refreshes
            let daemon = fixture.daemon
            let refreshEnded = Mutex(false)
            let refresh = Task {
                defer { refreshEnded.withLock { $0 = true } }
                return try await daemon.call("accounts.refresh", ["account": .string(bob.did), "force": true])
            }
            let sent = try await eventually { fixture.testbed.stats(did: bob.did).refreshes > before }
            try #require(sent, "the refresh reached the PDS")
            // The login begins while the refresh is out (the PDS holds it 3 s): the race this test
            // is for. Its store write takes the refresh's turn, so it ends after the refresh does
            // (docs/SECURITY.md, "The lifecycle's last doors"); which answer reaches this client
            // first is the sockets' business, not asserted.
            #expect(!refreshEnded.withLock { $0 }, "the refresh is still out as the login begins")
            let upgraded = try await fixture.oauthLogin(bob.handle, browser: fixture.browser, extra: ["account": .string(bob.handle)])
            #expect(upgraded["account"]?["auth"] == "oauth")
            _ = try? await refresh.value  // it ends, one way or another

            let calls = fixture.testbed.oauthStats(did: bob.did).authenticatedResourceCalls
            let call = try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--account", bob.handle,
                                                  "--param", "actor=\(bob.did)"])
            #expect(call.status == 0, "the OAuth login's tokens are the ones in use: \(call.stderr)")
            #expect(fixture.testbed.oauthStats(did: bob.did).authenticatedResourceCalls > calls, "the call went with DPoP")
            let listed = try #require(try await fixture.listedAccounts()[bob.handle])
            #expect(listed["auth"] == "oauth" && listed["state"] == "active", "\(listed)")
        }
    }
}
