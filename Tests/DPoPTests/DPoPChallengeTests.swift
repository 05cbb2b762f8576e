import DPoP
import Testing

@Suite("DPoP challenges in server answers")
struct DPoPChallengeTests {
    static let nonceBody = #"{"error":"use_dpop_nonce","error_description":"Authorization server requires nonce in DPoP proof"}"#

    @Test("nonce challenges: either form, with either 400 or 401", arguments: [
        (400, nil, nonceBody),
        (401, nil, nonceBody),
        (401, #"DPoP error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof""#, ""),
        (400, #"DPoP error="use_dpop_nonce""#, ""),
        (401, "DPoP error=use_dpop_nonce", ""),
        (401, #"dpop ERROR="use_dpop_nonce""#, ""),
        (401, #"DPoP algs="ES256 RS256", error="use_dpop_nonce""#, ""),
        (401, #"Bearer realm="pds", DPoP algs="ES256", error="use_dpop_nonce""#, ""),
        (401, #"DPoP error = "use_dpop_nonce" , error_description="x""#, ""),
        (401, #"DPoP error="invalid_dpop_proof""#, nonceBody),
    ] as [(Int, String?, String)])
    func nonceChallenge(status: Int, header: String?, body: String) {
        #expect(DPoPChallenge.classify(status: status, wwwAuthenticate: header, body: Array(body.utf8)) == .useNonce)
        #expect(DPoPChallenge.isNonceChallenge(status: status, wwwAuthenticate: header, body: Array(body.utf8)))
    }

    @Test("not a nonce challenge", arguments: [
        (200, nil, nonceBody),
        (500, #"DPoP error="use_dpop_nonce""#, nonceBody),
        (400, nil, #"{"error":"invalid_grant","error_description":"Refresh token replayed"}"#),
        (401, #"DPoP error="invalid_dpop_proof", error_description="use_dpop_nonce is not the problem""#, ""),
        (401, #"Bearer error="use_dpop_nonce""#, ""),
        (400, nil, "use_dpop_nonce"),
        (400, nil, #"{"error":["use_dpop_nonce"]}"#),
        (401, nil, ""),
        (401, #"DPoP error="use_dpop_nonce"#, ""),
        (401, "DPoP error=", ""),
        (401, "=====, ,,", ""),
        (401, #"DPoP error="use_dpop_nonce\"x""#, ""),
    ] as [(Int, String?, String)])
    func notNonceChallenge(status: Int, header: String?, body: String) {
        #expect(!DPoPChallenge.isNonceChallenge(status: status, wwwAuthenticate: header, body: Array(body.utf8)))
    }

    @Test("invalid_token on 401 keeps its description, escaped quotes included")
    func invalidToken() {
        let header = #"DPoP algs="ES256", error="invalid_token", error_description="\"exp\" claim timestamp check failed""#
        #expect(DPoPChallenge.classify(status: 401, wwwAuthenticate: header, body: []) ==
            .invalidToken(description: #""exp" claim timestamp check failed"#))
        #expect(DPoPChallenge.classify(status: 401, wwwAuthenticate: #"DPoP error="invalid_token""#, body: []) ==
            .invalidToken(description: nil))
        #expect(DPoPChallenge.classify(status: 403, wwwAuthenticate: #"DPoP error="invalid_token""#, body: []) == nil)
    }

    @Test("WWW-Authenticate with several challenges parses into schemes and parameters")
    func parser() {
        let challenges = AuthenticateChallenge.parse(#"Bearer realm="a, b", error="x", DPoP algs="ES256" , error=use_dpop_nonce"#)
        #expect(challenges == [
            AuthenticateChallenge(scheme: "bearer", parameters: ["realm": "a, b", "error": "x"]),
            AuthenticateChallenge(scheme: "dpop", parameters: ["algs": "ES256", "error": "use_dpop_nonce"]),
        ])
        #expect(AuthenticateChallenge.parse("DPoP") == [AuthenticateChallenge(scheme: "dpop", parameters: [:])])
        #expect(AuthenticateChallenge.parse("") == [])
    }
}
