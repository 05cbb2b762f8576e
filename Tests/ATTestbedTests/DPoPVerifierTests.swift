import ATTestbed
import Crypto
import DPoP
import Foundation
import Testing

@Suite("DPoP verifier (testbed side)")
struct DPoPVerifierTests {
    /// One fixed instant for signer and verifier alike: no check here depends on time passing.
    let fixedNow = Date(timeIntervalSince1970: 1_800_000_000)
    let key = DPoPKey.generate()
    let pdsURL = "https://pds.example.com/xrpc/app.bsky.feed.getTimeline"
    let parURL = "https://auth.example.com/oauth/par"
    let token = "the-access-token"

    var signer: DPoPSigner { DPoPSigner(key: key, now: { [fixedNow] in fixedNow }) }
    func verifier(exact: Bool = true) -> DPoPVerifier {
        DPoPVerifier(issuedAtTolerance: 10, requiresExactTargetURI: exact, now: { [fixedNow] in fixedNow })
    }

    /// A proof with hand-written header and claims, signed by `key` (or another).
    func handmade(header: String? = nil, claims: String, signedBy signingKey: P256.Signing.PrivateKey? = nil) throws -> String {
        let header = header ?? #"{"typ":"dpop+jwt","alg":"ES256","jwk":\#(key.publicJWK.json)}"#
        return try ES256.sign(headerJSON: header, payloadJSON: claims, key: signingKey ?? key.privateKey)
    }

    var now: Int { Int(fixedNow.timeIntervalSince1970) }

    @Test("a good resource proof passes and yields the key's thumbprint")
    func accepts() throws {
        let proof = try signer.proof(for: .resource(method: "GET", url: pdsURL + "?limit=1", accessToken: token), nonce: "n2")
        let verified = try verifier().verify(proof, method: "GET", url: pdsURL + "?limit=1", accessToken: token,
                                             boundThumbprint: key.thumbprint, acceptedNonces: ["n1", "n2", "n3"])
        #expect(verified.thumbprint == key.thumbprint)
        #expect(verified.nonce == "n2")
    }

    @Test("missing, malformed, wrong typ, wrong alg, bad jwk and bad signature are each refused")
    func structure() throws {
        let verifier = verifier()
        let claims = #"{"jti":"j1","htm":"POST","htu":"\#(parURL)","iat":\#(now)}"#
        func check(_ proof: String?, _ expected: DPoPVerificationError) {
            #expect(throws: expected) { try verifier.verify(proof, method: "POST", url: parURL) }
        }
        check(nil, .missingProof)
        check("", .missingProof)
        check("not.a.jws!", .malformed("not a compact JWS"))
        check("a.b", .malformed("not a compact JWS"))
        check(try handmade(header: #"{"typ":"JWT","alg":"ES256","jwk":\#(key.publicJWK.json)}"#, claims: claims), .wrongType)
        check(try handmade(header: #"{"typ":"dpop+jwt","alg":"HS256","jwk":\#(key.publicJWK.json)}"#, claims: claims),
              .unsupportedAlgorithm)
        check(try handmade(header: #"{"typ":"dpop+jwt","alg":"ES256"}"#, claims: claims), .invalidKey)
        let privateJWK = #"{"crv":"P-256","kty":"EC","x":"\#(key.publicJWK.x)","y":"\#(key.publicJWK.y)","d":"AAAA"}"#
        check(try handmade(header: #"{"typ":"dpop+jwt","alg":"ES256","jwk":\#(privateJWK)}"#, claims: claims), .invalidKey)
        // Signed by another key than the one in the header.
        check(try handmade(claims: claims, signedBy: P256.Signing.PrivateKey()), .invalidSignature)
        check(try handmade(claims: "[1,2]"), .malformed("claims are not a JSON object of the DPoP shape"))
    }

    @Test("claims: missing jti, wrong htm, wrong htu, missing or out-of-window iat")
    func claims() throws {
        let verifier = verifier()
        func check(_ claims: String, _ expected: DPoPVerificationError) throws {
            let proof = try handmade(claims: claims)
            #expect(throws: expected) { try verifier.verify(proof, method: "POST", url: parURL) }
        }
        try check(#"{"htm":"POST","htu":"\#(parURL)","iat":\#(now)}"#, .missingJTI)
        try check(#"{"jti":"","htm":"POST","htu":"\#(parURL)","iat":\#(now)}"#, .missingJTI)
        try check(#"{"jti":"j","htm":"GET","htu":"\#(parURL)","iat":\#(now)}"#, .methodMismatch)
        try check(#"{"jti":"j","htm":"post","htu":"\#(parURL)","iat":\#(now)}"#, .methodMismatch)
        try check(#"{"jti":"j","htm":"POST","htu":"https://auth.example.com/oauth/token","iat":\#(now)}"#, .targetMismatch)
        try check(#"{"jti":"j","htm":"POST","htu":"\#(parURL)?x=1","iat":\#(now)}"#, .targetMismatch)
        try check(#"{"jti":"j","htm":"POST","htu":"\#(parURL)"}"#, .missingIssuedAt)
        try check(#"{"jti":"j","htm":"POST","htu":"\#(parURL)","iat":\#(now - 11)}"#, .tooOld)
        try check(#"{"jti":"j","htm":"POST","htu":"\#(parURL)","iat":\#(now + 11)}"#, .issuedInFuture)
        // The edges of the window are inside it.
        #expect(throws: Never.self) {
            _ = try verifier.verify(try handmade(claims: #"{"jti":"a","htm":"POST","htu":"\#(parURL)","iat":\#(now - 10)}"#),
                                method: "POST", url: parURL)
            _ = try verifier.verify(try handmade(claims: #"{"jti":"b","htm":"POST","htu":"\#(parURL)","iat":\#(now + 10)}"#),
                                method: "POST", url: parURL)
        }
    }

    @Test("a lenient verifier normalises the claimed htu; a strict one wants it exact")
    func lenientTarget() throws {
        let proof = try handmade(claims: #"{"jti":"j","htm":"POST","htu":"HTTPS://Auth.example.com:443/oauth/par?x","iat":\#(now)}"#)
        #expect(throws: DPoPVerificationError.targetMismatch) { try verifier().verify(proof, method: "POST", url: parURL) }
        #expect(throws: Never.self) { try verifier(exact: false).verify(proof, method: "POST", url: parURL) }
    }

    @Test("nonces: none or an unknown one gives use_dpop_nonce; servers without nonces ignore them")
    func nonces() throws {
        let verifier = verifier()
        let request = try DPoPRequest.authorizationServer(method: "POST", url: parURL)
        #expect(throws: DPoPVerificationError.useNonce) {
            try verifier.verify(try signer.proof(for: request), method: "POST", url: parURL, acceptedNonces: ["n1"])
        }
        #expect(throws: DPoPVerificationError.useNonce) {
            try verifier.verify(try signer.proof(for: request, nonce: "old"), method: "POST", url: parURL, acceptedNonces: ["n1"])
        }
        #expect(DPoPVerificationError.useNonce.oauthError == "use_dpop_nonce")
        #expect(throws: Never.self) { try verifier.verify(try signer.proof(for: request, nonce: "x"), method: "POST", url: parURL) }
    }

    @Test("ath: required and exact with an access token, refused without one")
    func accessTokenHash() throws {
        let verifier = verifier()
        let resource = try signer.proof(for: .resource(method: "GET", url: pdsURL, accessToken: token))
        #expect(throws: DPoPVerificationError.accessTokenHashMismatch) {
            try verifier.verify(resource, method: "GET", url: pdsURL, accessToken: "another-token")
        }
        let noAth = try signer.proof(for: .authorizationServer(method: "GET", url: pdsURL))
        #expect(throws: DPoPVerificationError.accessTokenHashMismatch) {
            try verifier.verify(noAth, method: "GET", url: pdsURL, accessToken: token)
        }
        let athToAS = try handmade(claims: #"{"jti":"j","htm":"POST","htu":"\#(parURL)","iat":\#(now),"ath":"abc"}"#)
        #expect(throws: DPoPVerificationError.accessTokenHashNotAllowed) { try verifier.verify(athToAS, method: "POST", url: parURL) }
    }

    @Test("a proof is accepted once; a refused proof does not use up its jti")
    func replay() throws {
        let verifier = verifier()
        let proof = try signer.proof(for: .authorizationServer(method: "POST", url: parURL))
        #expect(throws: DPoPVerificationError.methodMismatch) { try verifier.verify(proof, method: "GET", url: parURL) }
        #expect(throws: Never.self) { try verifier.verify(proof, method: "POST", url: parURL) }
        #expect(throws: DPoPVerificationError.replayed) { try verifier.verify(proof, method: "POST", url: parURL) }
        #expect(DPoPVerificationError.replayed.description == "DPoP proof replayed")
    }

    @Test("the proof key must be the one the token is bound to")
    func keyBinding() throws {
        let proof = try signer.proof(for: .resource(method: "GET", url: pdsURL, accessToken: token))
        let other = DPoPKey.generate()
        #expect(throws: DPoPVerificationError.keyBindingMismatch) {
            try verifier().verify(proof, method: "GET", url: pdsURL, accessToken: token, boundThumbprint: other.thumbprint)
        }
        #expect(DPoPVerificationError.keyBindingMismatch.description == "Invalid DPoP key binding")
    }

    @Test("the replay cache forgets expired jti values and never exceeds its capacity")
    func replayCacheBounds() {
        let cache = DPoPReplayCache(capacity: 3)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        for index in 0..<5 {
            #expect(cache.insertIfUnseen("j\(index)", expiry: start.addingTimeInterval(20), now: start))
            #expect(cache.count <= 3)
        }
        #expect(!cache.insertIfUnseen("j4", expiry: start.addingTimeInterval(20), now: start))
        // After expiry, everything is pruned and the same jti would pass the cache (iat refuses it).
        #expect(cache.insertIfUnseen("j9", expiry: start.addingTimeInterval(40), now: start.addingTimeInterval(21)))
        #expect(cache.count == 1)
    }
}
