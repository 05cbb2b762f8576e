import BlueskyHTTP
import Foundation
import Testing
@testable import XRPC

@Suite("XRPC requests and the Lexicon method table")
struct XRPCRequestTests {
    let pds = URL(string: "https://pds.example.com")!

    @Test("queries are GETs with their parameters encoded, repeated keys for arrays")
    func queryURL() {
        let request = XRPCRequest(service: pds, nsid: "app.bsky.actor.getProfiles", kind: .query, parameters: [
            ("actors", .list(["alice.example.com", "did:plc:abc"])),
            ("q", .single("a+b c&d=é")),
        ])
        let outbound = request.outbound(authorization: "Bearer t")
        #expect(outbound.method == "GET")
        #expect(outbound.body == nil)
        #expect(outbound.url.absoluteString ==
            "https://pds.example.com/xrpc/app.bsky.actor.getProfiles?actors=alice.example.com&actors=did:plc:abc&q=a%2Bb%20c%26d%3D%C3%A9")
        #expect(outbound.headers.contains { $0 == ("Authorization", "Bearer t") })
    }

    @Test("a service URL with a path keeps it (an entryway behind a prefix)")
    func servicePath() {
        let request = XRPCRequest(service: URL(string: "https://example.com/pds/")!, nsid: "com.atproto.server.getSession", kind: .query)
        #expect(request.url.absoluteString == "https://example.com/pds/xrpc/com.atproto.server.getSession")
    }

    @Test("procedures are POSTs; raw bodies keep their content type")
    func procedureBody() {
        let upload = XRPCRequest(service: pds, nsid: "com.atproto.repo.uploadBlob", kind: .procedure,
                                 body: .bytes([0xFF, 0xD8], contentType: "image/jpeg")).outbound(authorization: nil)
        #expect(upload.method == "POST")
        #expect(upload.body == [0xFF, 0xD8])
        #expect(upload.headers.contains { $0 == ("Content-Type", "image/jpeg") })
        let empty = XRPCRequest(service: pds, nsid: "com.atproto.server.refreshSession", kind: .procedure).outbound(authorization: nil)
        #expect(empty.body == [], "a procedure without input still sends an (empty) body")
    }

    @Test("method kinds come from the bundled Lexicons")
    func lexiconKinds() {
        #expect(LexiconMethods.kind(of: "app.bsky.feed.getTimeline") == .query)
        #expect(LexiconMethods.kind(of: "com.atproto.repo.createRecord") == .procedure)
        #expect(LexiconMethods.kind(of: "com.atproto.sync.subscribeRepos") == .subscription)
        #expect(LexiconMethods.kind(of: "com.example.unknown") == nil)
        #expect(LexiconMethods.inputEncoding(of: "com.atproto.repo.uploadBlob") == "*/*")
        #expect(LexiconMethods.count > 300)
    }

    @Test("the expiry is read from the token's payload")
    func jwtExpiry() {
        func b64(_ s: String) -> String {
            Data(s.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        }
        let token = b64(#"{"alg":"HS256"}"#) + "." + b64(#"{"sub":"did:plc:abc","exp":1900000000,"iat":1899990000}"#) + ".sig"
        let claims = JWTClaims(token: token)
        #expect(claims?.expiresAt == Date(timeIntervalSince1970: 1_900_000_000))
        #expect(claims?.subject == "did:plc:abc")
        #expect(JWTClaims(token: "not a jwt") == nil)
    }

    @Test("failed session answers are sorted by what to do about them")
    func classification() {
        func response(_ status: Int, _ body: String, headers: [(String, String)] = []) -> InboundResponse {
            InboundResponse(status: status, headers: [("Content-Type", "application/json")] + headers, body: Array(body.utf8))
        }
        #expect(LegacySessionClient.classify(response(503, #"{"error":"InternalServerError"}"#)) ==
            .transient("HTTP 503: InternalServerError", retryAfter: nil))
        if case .transient(_, let after) = LegacySessionClient.classify(response(429, "{}", headers: [("Retry-After", "7")])) {
            #expect(after == 7)
        } else {
            Issue.record("429 is transient")
        }
        #expect(LegacySessionClient.classify(response(400, #"{"error":"ExpiredToken","message":"Token has been revoked"}"#)) ==
            .expiredToken("ExpiredToken: Token has been revoked"))
        #expect(LegacySessionClient.classify(response(401, #"{"error":"AuthFactorTokenRequired","message":"code sent"}"#)) ==
            .authFactorTokenRequired("code sent"))
        #expect(LegacySessionClient.classify(response(401, #"{"error":"InvalidToken","message":"revoked"}"#)) ==
            .rejected("InvalidToken: revoked"))
    }
}
