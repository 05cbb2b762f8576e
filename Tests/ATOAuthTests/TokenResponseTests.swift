import ATOAuth
import Foundation
import JSONRPC
import Testing

@Suite("Token responses and OAuth errors")
struct TokenResponseTests {
    static let did = "did:plc:ewvi7nxzyoun6zhxrhs64oiz"
    static let good: [String: JSONValue] = [
        "access_token": "secret-access-token", "token_type": "DPoP", "refresh_token": "secret-refresh-token", "expires_in": 3600,
        "scope": "atproto transition:generic", "sub": .string(did),
    ]
    let receivedAt = Date(timeIntervalSince1970: 1_800_000_000)

    func parse(_ changes: [String: JSONValue?], expectedDID: String? = did) throws(TokenResponseError) -> OAuthTokenSet {
        var object = Self.good
        for (name, value) in changes { object[name] = value }
        return try OAuthTokenSet(responseBody: JSONValue.object(object).encoded(), expectedDID: expectedDID, receivedAt: receivedAt)
    }

    @Test("a good response gives the tokens, the DID, the granted scope and the expiry")
    func accepted() throws {
        let tokens = try parse([:])
        #expect(tokens.accessToken == "secret-access-token" && tokens.refreshToken == "secret-refresh-token")
        #expect(tokens.did.string == Self.did)
        #expect(tokens.expiresAt == receivedAt.addingTimeInterval(3600))
        // The server granted less than asked: keep what it granted.
        #expect(try parse(["scope": "atproto"]).scope == "atproto")
        // token_type is case-insensitive; the DID may be unknown on a first login.
        #expect(throws: Never.self) { try parse(["token_type": "dpop"], expectedDID: nil) }
        for printed in ["\(tokens)", String(reflecting: tokens)] { #expect(!printed.contains("secret")) }
    }

    @Test("each rule failing in turn", arguments: [
        (["access_token": nil], TokenResponseError.missingAccessToken),
        (["access_token": ""], .missingAccessToken),
        (["token_type": "Bearer"], .wrongTokenType("Bearer")),
        (["token_type": nil], .wrongTokenType(nil)),
        (["scope": nil], .missingScope),
        (["scope": "transition:generic"], .scopeLacksAtproto("transition:generic")),
        (["scope": "atproto:x"], .scopeLacksAtproto("atproto:x")),
        (["sub": nil], .missingSubject),
        (["sub": "alice.example.com"], .invalidSubject("alice.example.com")),
        (["sub": "did:plc:someoneelse"], .subjectMismatch(expected: TokenResponseTests.did, actual: "did:plc:someoneelse")),
        (["expires_in": 0], .invalidExpiry),
        (["expires_in": -5], .invalidExpiry),
        (["expires_in": "3600"], .invalidExpiry),
        (["expires_in": nil], .invalidExpiry),
        (["refresh_token": nil], .missingRefreshToken),
    ] as [([String: JSONValue?], TokenResponseError)])
    func failures(changes: [String: JSONValue?], expected: TokenResponseError) {
        #expect(throws: expected) { try parse(changes) }
    }

    @Test("a body that is not a JSON object is refused")
    func notJSON() {
        #expect(throws: TokenResponseError.notJSON) {
            try OAuthTokenSet(responseBody: Array("<html>".utf8), expectedDID: nil, receivedAt: receivedAt)
        }
        #expect(throws: TokenResponseError.notJSON) {
            try OAuthTokenSet(responseBody: Array("[1]".utf8), expectedDID: nil, receivedAt: receivedAt)
        }
    }

    @Test("OAuth errors keep their reason: invalid_grant says why")
    func errors() throws {
        let replayed = try #require(OAuthErrorResponse(
            status: 400, body: Array(#"{"error":"invalid_grant","error_description":"Refresh token replayed"}"#.utf8)))
        #expect(replayed.isInvalidGrant)
        #expect(replayed.errorDescription == "Refresh token replayed")
        #expect(replayed.description == "invalid_grant: Refresh token replayed (HTTP 400)")
        let nonce = try #require(OAuthErrorResponse(status: 400, body: Array(#"{"error":"use_dpop_nonce"}"#.utf8)))
        #expect(nonce.isUseDPoPNonce && !nonce.isInvalidGrant && nonce.errorDescription == nil)
        #expect(OAuthErrorResponse(status: 500, body: Array("Internal Server Error".utf8)) == nil)
        #expect(OAuthErrorResponse(status: 400, body: Array(#"{"error":42}"#.utf8)) == nil)
    }
}
