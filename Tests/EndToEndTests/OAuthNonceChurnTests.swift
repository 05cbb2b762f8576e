import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

@Suite("OAuth with servers that send a new DPoP nonce on every answer")
struct OAuthNonceChurnTests {
    @Test("login, proxied calls and a refresh all succeed; each costs at most one nonce retry, and steady calls none")
    func everyAnswerANewNonce() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let browser = fixture.browser
            let testbed = fixture.testbed
            let alice = fixture.accounts[0]
            // Only the latest nonce each server issued is accepted: a client must take the nonce of
            // every answer, including the browser's visit to the authorize page in between.
            testbed.setOAuthMisbehaviour(.newNonceOnEveryResponse, enabled: true)

            try await fixture.loginWithBskyctl(alice.handle, browser: browser)
            let calls = 10
            func callPDS() async throws {
                for _ in 0..<calls / 2 {
                    let reply = try await fixture.daemon.call("xrpc.call", [
                        "nsid": "app.bsky.actor.getProfile", "account": .string(alice.did), "params": ["actor": .string(alice.did)],
                    ])
                    #expect(reply["status"] == 200, "\(String(describing: reply["body"]))")
                }
            }
            try await callPDS()
            let refresh = try await fixture.bskyctl(["refresh", alice.handle])
            #expect(refresh.status == 0, "\(refresh.stderr)")
            try await callPDS()

            let stats = testbed.oauthStats(did: alice.did)
            #expect(stats.pushedAuthorizationRequests == 1 && stats.tokenExchanges == 1 && stats.refreshes == 1)
            #expect(stats.authenticatedResourceCalls == calls, "each call passed once: \(stats.authenticatedResourceCalls)")
            #expect(stats.totalDPoPRejections == 0 && stats.invalidGrants == 0 && stats.refreshTokenReplays == 0,
                    "\(stats.dpopRejections)")
            // At the authorization server: PAR, code exchange and refresh, each retried at most once.
            #expect(stats.authorizationServerNonceChallenges <= 3, "\(stats.authorizationServerNonceChallenges) challenges")
            let requests = testbed.authorizationServerRequests.filter { $0.issuer == testbed.oauthIssuer }
            for purpose in ["PAR", "token authorization_code", "token refresh_token"] {
                let attempts = requests.filter { $0.purpose == purpose }
                #expect((1...2).contains(attempts.count) && attempts.last?.succeeded == true,
                        "\(purpose): \(attempts.map { $0.error ?? "ok" })")
            }
            // At the PDS: the first call knows no nonce yet; every later one carries the nonce of the
            // answer before it (a client that kept only challenged nonces would pay on every call).
            #expect(stats.pdsNonceChallenges <= 1, "\(stats.pdsNonceChallenges) PDS challenges for \(calls) calls")
        }
    }
}
