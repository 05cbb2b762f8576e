import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

@Suite("The daemon's real DPoP proofs, checked by an independent verifier (Python, joserfc)")
struct OAuthProofCheckTests {
    @Test("a proxied call's proof: ES256 signature by the token's bound key, htm, htu without query, ath, fresh jti")
    func proofsPassJoserfc() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let browser = fixture.browser
            let alice = fixture.accounts[0]
            _ = try await fixture.oauthLogin(alice.handle, browser: browser)

            var proofs: Set<String> = []
            for _ in 0..<2 {
                let call = try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--param", "actor=\(alice.did)"])
                #expect(call.status == 0, "\(call.stderr)")
                let sent = try #require(fixture.testbed.lastDPoPResourceRequest(did: alice.did))
                #expect(sent.htu == fixture.testbed.pdsURL + "/xrpc/app.bsky.actor.getProfile", "htu has no query")
                let verdict = try ProofVerifier.run([sent.proof, "GET", sent.htu, "--access-token", sent.accessToken])
                #expect(verdict.status == 0, "joserfc accepts the proof: \(verdict.output)")
                #expect(verdict.output.trimmingCharacters(in: .whitespacesAndNewlines) == sent.boundThumbprint,
                        "the proof's key is the one the token is bound to")
                proofs.insert(sent.proof)
            }
            #expect(proofs.count == 2, "each call has its own proof (fresh jti)")

            // The same checker refuses a proof presented for another target or token: it can fail.
            let sent = try #require(fixture.testbed.lastDPoPResourceRequest(did: alice.did))
            #expect(try ProofVerifier.run([sent.proof, "POST", sent.htu, "--access-token", sent.accessToken]).status != 0)
            #expect(try ProofVerifier.run([sent.proof, "GET", sent.htu, "--access-token", "another-token"]).status != 0)
        }
    }
}
