import BlueskyHTTP
import Foundation
import Testing
@testable import XRPC

@Suite("What a refresh answer means, and how long a server asks to wait")
struct RefreshVerdictTests {
    private func response(_ status: Int, _ body: String, headers: [(String, String)] = []) -> InboundResponse {
        InboundResponse(status: status, headers: [("Content-Type", "application/json")] + headers, body: Array(body.utf8))
    }

    @Test("the reference PDS's answers to a revoked, expired or unverifiable refresh token end the session")
    func definitive() {
        let expired = LegacySessionClient.classifyRefresh(response(400, #"{"error":"ExpiredToken","message":"Token has been revoked"}"#))
        #expect(expired == .expiredToken("ExpiredToken: Token has been revoked"))
        for name in ["InvalidToken", "AccountTakedown"] {
            let verdict = LegacySessionClient.classifyRefresh(response(401, #"{"error":"\#(name)","message":"x"}"#))
            #expect(verdict == .rejected("\(name): x"))
        }
    }

    @Test("anything else keeps the account retrying: other 4xx, 5xx, 429, HTML pages")
    func notDefinitive() {
        let cases = [
            response(400, #"{"error":"InvalidRequest","message":"Could not find user info for account"}"#),
            response(401, #"{"error":"AuthRequired"}"#),
            response(404, "<html>Not Found</html>"),
            response(502, "<html><body>Bad Gateway</body></html>"),
            response(429, #"{"error":"RateLimitExceeded"}"#, headers: [("Retry-After", "42")]),
        ]
        for answer in cases {
            guard case .transient(_, let after) = LegacySessionClient.classifyRefresh(answer) else {
                Issue.record("HTTP \(answer.status) must not end the session")
                continue
            }
            #expect(after == (answer.status == 429 ? 42 : nil))
        }
    }

    /// One canned outcome for every request.
    private struct CannedHTTP: HTTPFetching {
        let outcome: Result<InboundResponse, HTTPError>
        func send(_ request: OutboundRequest, timeout: Duration) async throws(HTTPError) -> InboundResponse {
            try outcome.get()
        }
    }

    @Test("""
        an answer that may have rotated the token (a body over the size limit, a 200 that is no session, a request \
        that may have arrived) is no answer: the mark stays; a request that never left is not
        """)
    func mayHaveRotated() async throws {
        let pds = try #require(URL(string: "https://pds.test"))
        let outcomes: [(Result<InboundResponse, HTTPError>, Bool)] = [
            (.failure(.bodyTooLarge("https://pds.test/xrpc/com.atproto.server.refreshSession", limit: 1 << 20)), true),
            (.failure(.mayHaveBeenReceived("https://pds.test/xrpc/com.atproto.server.refreshSession")), true),
            (.success(response(200, "<html>maintenance</html>")), true),
            (.success(response(200, #"{"did":"did:plc:alice"}"#)), true),
            (.failure(.insecureURL("http://pds.test/xrpc/com.atproto.server.refreshSession")), false),
        ]
        for (outcome, mayHaveRotated) in outcomes {
            let client = LegacySessionClient(http: CannedHTTP(outcome: outcome))
            do {
                _ = try await client.refreshSession(pds: pds, refreshJwt: "r1")
                Issue.record("\(outcome) must fail the refresh")
            } catch {
                if case .noAnswer = error { #expect(mayHaveRotated, "\(outcome) never reached the server: \(error)") } else {
                    #expect(!mayHaveRotated, "\(outcome) may have rotated the token, yet: \(error)")
                }
            }
        }
    }

    @Test("Retry-After in seconds or as an HTTP date, then RateLimit-Reset as a Unix time or seconds")
    func serverAskedWait() throws {
        let now = Date(timeIntervalSince1970: 1_795_000_000)
        func wait(_ headers: [(String, String)]) -> TimeInterval? {
            InboundResponse(status: 429, headers: headers, body: []).serverAskedWait(now: now)
        }
        #expect(wait([("Retry-After", "120")]) == 120)
        #expect(wait([("retry-after", " 7 ")]) == 7)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        #expect(wait([("Retry-After", formatter.string(from: now.addingTimeInterval(90)))]) == 90)
        #expect(wait([("Retry-After", formatter.string(from: now.addingTimeInterval(-90)))]) == 0, "a date past is no wait")
        #expect(wait([("RateLimit-Reset", "1795000300")]) == 300)
        #expect(wait([("RateLimit-Reset", "30")]) == 30, "the IETF draft's delta seconds")
        #expect(wait([("Retry-After", "120"), ("RateLimit-Reset", "1795000300")]) == 120, "Retry-After first")
        for garbage in ["-5", "1e9", "soon", "", "99999999999999999999"] {
            #expect(wait([("Retry-After", garbage)]) == nil, "\(garbage)")
        }
        #expect(wait([]) == nil)
    }
}
