import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

/// The proofs the daemon sends to the authorization server, as it sent them (the testbed records
/// them), judged by joserfc rather than by the project's own DPoP code: what a strict server
/// outside this project would check.
@Suite("The daemon's DPoP proofs to the authorization server, checked by an independent verifier (Python, joserfc)")
struct OAuthAuthorizationServerProofTests {
    @Test("PAR, code exchange, refreshes and logout: valid proofs for the exact endpoint, without ath, with a nonce, fresh jti, one key throughout")
    func proofsOfAWholeSession() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let browser = fixture.browser
            let testbed = fixture.testbed
            let alice = fixture.accounts[0]

            try await fixture.loginWithBskyctl(alice.handle, browser: browser)
            var resourceRequests: [RecordedDPoPRequest] = []
            for _ in 0..<2 {
                let refresh = try await fixture.bskyctl(["refresh", alice.handle])
                #expect(refresh.status == 0, "\(refresh.stderr)")
                let call = try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--param", "actor=\(alice.did)"])
                #expect(call.status == 0, "\(call.stderr)")
                resourceRequests.append(try #require(testbed.lastDPoPResourceRequest(did: alice.did)))
            }
            let logout = try await fixture.bskyctl(["logout", alice.handle])
            #expect(logout.status == 0, "\(logout.stderr)")
            #expect(testbed.oauthSessionCount(did: alice.did) == 0, "logout ended the session")

            let requests = testbed.authorizationServerRequests.filter { $0.issuer == testbed.oauthIssuer }
            #expect(requests.filter(\.succeeded).map(\.purpose) == [
                "PAR", "token authorization_code", "token refresh_token", "token refresh_token",
                "revocation refresh_token", "revocation access_token",
            ])
            // Only the first PAR may be challenged: no nonce is known before it. Every later request
            // reuses the nonce of the answer before it.
            let refused = requests.filter { !$0.succeeded }.map { "\($0.purpose): \($0.error ?? "-")" }
            #expect(refused.isEmpty || refused == ["PAR: use_dpop_nonce"], "\(refused)")

            var keys: Set<String> = []
            var jtis: [String] = []
            for request in requests {
                let proof = try #require(request.proof, "\(request.purpose) carries a DPoP proof")
                let endpointURL = testbed.oauthIssuer + Self.path(of: request.endpoint)
                let verdict = try ProofVerifier.run([proof, "POST", endpointURL, "--no-ath"])
                #expect(verdict.status == 0, "joserfc accepts the \(request.purpose) proof: \(verdict.output)")
                keys.insert(verdict.output.trimmingCharacters(in: .whitespacesAndNewlines))
                let claims = try #require(ProofVerifier.claims(proof))
                jtis.append(claims["jti"]?.stringValue ?? "")
                let iat = try #require(claims["iat"]?.doubleValue)
                #expect(abs(iat - request.receivedAt.timeIntervalSince1970) <= 5,
                        "\(request.purpose): iat within seconds of the server's clock")
                if request.succeeded {
                    #expect(claims["nonce"]?.stringValue?.isEmpty == false, "\(request.purpose): the accepted proof has a nonce")
                }
            }
            for sent in resourceRequests {
                let verdict = try ProofVerifier.run([sent.proof, "GET", sent.htu, "--access-token", sent.accessToken])
                #expect(verdict.status == 0, "joserfc accepts the PDS proof: \(verdict.output)")
                let key = verdict.output.trimmingCharacters(in: .whitespacesAndNewlines)
                keys.insert(key)
                jtis.append(ProofVerifier.claims(sent.proof)?["jti"]?.stringValue ?? "")
                // The access token is the testbed's own JWT: its cnf.jkt is what the server bound.
                #expect(ProofVerifier.claims(sent.accessToken)?["cnf"]?["jkt"]?.stringValue == key,
                        "the access token is bound to the proofs' key")
            }
            #expect(keys.count == 1, "PAR, token, every refresh, the revocations and the PDS calls use one key: \(keys.count) keys")
            #expect(Set(jtis).count == jtis.count && !jtis.contains(""), "every proof has its own jti")

            // The checker can tell: the PAR proof is no proof for the token endpoint, nor one with ath.
            let par = try #require(requests.last { $0.endpoint == .pushedAuthorization }?.proof)
            #expect(try ProofVerifier.run([par, "POST", testbed.oauthIssuer + "/oauth/token", "--no-ath"]).status != 0)
            #expect(try ProofVerifier.run([par, "POST", testbed.oauthIssuer + "/oauth/par", "--access-token", "x"]).status != 0)
        }
    }

    @Test("with the server's clock 30 s ahead, the refresh's proof is signed again once with the server's time, and stays so")
    func proofsFollowTheServersClock() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let browser = fixture.browser
            let testbed = fixture.testbed
            let alice = fixture.accounts[0]
            try await fixture.loginWithBskyctl(alice.handle, browser: browser)

            // Less than a nonce's life, far more than the 10 s a proof's iat may be off.
            testbed.advanceClock(by: .seconds(30))
            let firstRefresh = testbed.authorizationServerRequests.count
            for _ in 0..<2 {
                let refresh = try await fixture.bskyctl(["refresh", alice.handle])
                #expect(refresh.status == 0, "the refresh succeeds across the step: \(refresh.stderr)")
            }
            let refreshes = testbed.authorizationServerRequests.dropFirst(firstRefresh)
            let refused = refreshes.filter { !$0.succeeded }
            #expect(refused.count <= 1 && refused.allSatisfy { $0.error == "invalid_dpop_proof" },
                    "at most the first proof after the step is refused: \(refused.map { $0.error ?? "-" })")
            #expect(refreshes.filter(\.succeeded).count == 2)
            for request in refreshes where request.succeeded {
                let proof = try #require(request.proof)
                #expect(try ProofVerifier.run([proof, "POST", testbed.oauthIssuer + "/oauth/token", "--no-ath"]).status == 0)
                let iat = try #require(ProofVerifier.claims(proof)?["iat"]?.doubleValue)
                #expect(abs(iat - request.receivedAt.timeIntervalSince1970) <= 5, "iat follows the server's clock")
                #expect(iat - Date().timeIntervalSince1970 >= 25, "not the local clock")
            }
            #expect(testbed.oauthStats(did: alice.did).refreshTokenReplays == 0)
        }
    }

    static func path(of endpoint: OAuthEndpoint) -> String {
        switch endpoint {
        case .pushedAuthorization: "/oauth/par"
        case .token: "/oauth/token"
        case .revocation: "/oauth/revoke"
        case .authorize: "/oauth/authorize"
        case .metadata: "/.well-known/oauth-authorization-server"
        case .protectedResourceMetadata: "/.well-known/oauth-protected-resource"
        }
    }
}

extension RecordedAuthorizationServerRequest {
    /// "PAR", "token refresh_token", "revocation access_token": what the request was for.
    var purpose: String {
        switch endpoint {
        case .pushedAuthorization: "PAR"
        case .token: "token \(grantType ?? "-")"
        case .revocation: "revocation \(tokenTypeHint ?? "-")"
        default: endpoint.rawValue
        }
    }
}
