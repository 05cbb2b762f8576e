import BlueskyTesting
import Crypto
import DPoP
import Foundation
import Testing

@Suite("DPoP proofs")
struct DPoPProofTests {
    let clock = ManualClock()

    func signer(_ key: DPoPKey = .generate()) -> DPoPSigner {
        DPoPSigner(key: key, now: clock.reading)
    }

    @Test("header is exactly typ, alg and the public JWK; the signature verifies with CryptoKit from that JWK")
    func headerAndSignature() throws {
        let signer = signer()
        let proof = try signer.proof(for: .authorizationServer(method: "POST", url: "https://auth.example.com/oauth/par"))
        let parts = try Independent.split(proof)
        #expect(parts.header["typ"] as? String == "dpop+jwt")
        #expect(parts.header["alg"] as? String == "ES256")
        #expect(Set(parts.header.keys) == ["typ", "alg", "jwk"])
        let jwk = try #require(parts.header["jwk"] as? [String: String])
        #expect(jwk == ["kty": "EC", "crv": "P-256", "x": signer.key.publicJWK.x, "y": signer.key.publicJWK.y])
        // Raw r||s, 64 bytes, not DER.
        #expect(parts.signature.count == 64)
        let publicKey = try Independent.publicKey(jwk: jwk)
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: parts.signature)
        #expect(publicKey.isValidSignature(signature, for: parts.signingInput))
        #expect(publicKey.rawRepresentation == signer.key.privateKey.publicKey.rawRepresentation)
        // A changed claim breaks it.
        var tampered = parts.signingInput
        tampered[tampered.count - 1] ^= 1
        #expect(!publicKey.isValidSignature(signature, for: tampered))
    }

    @Test("claims: jti, htm, normalised htu, iat from the clock plus the skew; nothing else without nonce or token")
    func claims() throws {
        let proof = try signer().proof(
            for: .authorizationServer(method: "POST", url: "https://Auth.Example.com:443/oauth/token?x=1#y"),
            clockSkew: 42.9)
        let claims = try Independent.split(proof).claims
        #expect(Set(claims.keys) == ["jti", "htm", "htu", "iat"])
        #expect(claims["htm"] as? String == "POST")
        #expect(claims["htu"] as? String == "https://auth.example.com/oauth/token")
        #expect(claims["iat"] as? Int == 1_800_000_042)
    }

    @Test("the nonce is sent verbatim, even with characters JSON must escape")
    func nonce() throws {
        let nonce = #"n-"quoted"\back\slash/é"#
        let proof = try signer().proof(for: .authorizationServer(method: "POST", url: "https://a.example/oauth/par"), nonce: nonce)
        #expect(try Independent.split(proof).claims["nonce"] as? String == nonce)
    }

    @Test("ath = base64url(SHA-256(token)) on resource requests only")
    func accessTokenHash() throws {
        let signer = signer()
        let token = "eyJ0eXAiOiJhdCtqd3QifQ.eyJzdWIiOiJkaWQ6cGxjOmFiYyJ9.c2ln"
        let resource = try signer.proof(for: .resource(method: "GET", url: "https://pds.example.com/xrpc/a.b.c?q=1",
                                                       accessToken: token))
        #expect(try Independent.split(resource).claims["ath"] as? String == Independent.sha256Base64URL(token))
        let authorization = try signer.proof(for: .authorizationServer(method: "POST", url: "https://a.example/oauth/token"))
        #expect(try Independent.split(authorization).claims["ath"] == nil)
        #expect(try DPoPRequest.authorizationServer(method: "POST", url: "https://a.example/x").accessTokenHash == nil)
    }

    @Test("each proof has a fresh jti of at least 96 bits")
    func uniqueJTI() throws {
        let signer = signer()
        let request = try DPoPRequest.resource(method: "GET", url: "https://pds.example.com/xrpc/a.b.c", accessToken: "t")
        var seen = Set<String>()
        for _ in 0..<500 {
            let jti = try #require(try Independent.split(signer.proof(for: request)).claims["jti"] as? String)
            #expect(try #require(Independent.base64URLDecode(jti)).count * 8 >= 96)
            #expect(seen.insert(jti).inserted)
        }
    }

    @Test("a lowercase or odd method is refused rather than silently changed", arguments: ["post", "", "GET ", "P0ST"])
    func methodValidation(method: String) {
        #expect(throws: DPoPError.invalidMethod(method)) {
            try DPoPRequest.authorizationServer(method: method, url: "https://a.example/x")
        }
    }

    @Test("an independent verifier (Python joserfc) accepts the signature and claims")
    func independentVerifier() throws {
        let key = DPoPKey.generate()
        let signer = DPoPSigner(key: key)
        let token = "access-token-value"
        let resource = try signer.proof(for: .resource(method: "GET", url: "https://PDS.example.com/xrpc/app.bsky.actor.getProfile?actor=x",
                                                       accessToken: token), nonce: "nonce-1")
        let accepted = try ProofVerifier.run([resource, "GET", "https://pds.example.com/xrpc/app.bsky.actor.getProfile",
                                               "--access-token", token, "--nonce", "nonce-1"])
        #expect(accepted.status == 0, "joserfc refused: \(accepted.output)")
        #expect(accepted.output.trimmingCharacters(in: .whitespacesAndNewlines) == key.thumbprint)

        let authorization = try signer.proof(for: .authorizationServer(method: "POST", url: "https://auth.example.com/oauth/par"))
        let noAth = try ProofVerifier.run([authorization, "POST", "https://auth.example.com/oauth/par", "--no-ath"])
        #expect(noAth.status == 0, "joserfc refused: \(noAth.output)")

        // The same script refuses a proof whose signature does not match: it can fail.
        let parts = authorization.split(separator: ".")
        let forged = parts[0] + "." + parts[1] + "." + String(parts[2].reversed())
        let refused = try ProofVerifier.run([String(forged), "POST", "https://auth.example.com/oauth/par"])
        #expect(refused.status != 0)
        let wrongTarget = try ProofVerifier.run([authorization, "POST", "https://auth.example.com/oauth/token"])
        #expect(wrongTarget.status != 0)
    }
}
