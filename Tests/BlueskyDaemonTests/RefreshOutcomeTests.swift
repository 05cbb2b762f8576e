import ATOAuth
import AccountStoreCore
import Foundation
import Testing
import WebBasics
import XRPC
@testable import BlueskyDaemon

@Suite("Refresh outcomes: verdicts, backoff and the account census")
struct RefreshOutcomeTests {
    @Test("only invalid_grant (and a token for someone else) ends an OAuth session")
    func oauthVerdicts() {
        func verdict(_ error: OAuthClientError) -> SessionError { AccountSession.sessionError(error) }
        #expect(verdict(.server(OAuthErrorResponse(status: 400, error: "invalid_grant", errorDescription: "Refresh token replayed")))
                == .rejected("Refresh token replayed"))
        #expect(verdict(.invalidTokenResponse(.subjectMismatch(expected: "did:plc:a", actual: "did:plc:b"))).isRejection)
        var limited = OAuthErrorResponse(status: 429, error: "rate_limit_exceeded")
        limited.retryAfter = 120
        #expect(verdict(.server(limited)).serverAskedWait == 120)
        for (status, name) in [(400, "invalid_client"), (500, "server_error"), (503, "temporarily_unavailable"),
                               (400, "invalid_request"), (401, "invalid_dpop_proof"), (403, "access_denied")] {
            let answer = verdict(.server(OAuthErrorResponse(status: status, error: name)))
            #expect(!answer.isRejection, "\(name) must keep the account")
        }
        #expect(!verdict(.unexpectedResponse(status: 502, endpoint: "token", retryAfter: 30)).isRejection)
        #expect(verdict(.unexpectedResponse(status: 404, endpoint: "token", retryAfter: 30)).serverAskedWait == 30)
        if case .noAnswer = verdict(.invalidTokenResponse(.missingAccessToken)) {} else {
            Issue.record("a 200 that cannot be used may have rotated the token: the mark must stay")
        }
    }

    @Test("the backoff grows to its maximum; what the server asked is never shortened, not even to the maximum")
    func backoff() {
        let backoff = Backoff(initial: .seconds(5), maximum: .seconds(600))
        #expect((4...5).contains(backoff.delay(attempt: 1, serverAsked: nil)))
        #expect((480...600).contains(backoff.delay(attempt: 20, serverAsked: nil)))
        #expect(backoff.delay(attempt: 1, serverAsked: 3600) == 3600)
        #expect(backoff.delay(attempt: 500, serverAsked: nil) <= 600, "no overflow after many failures")
        #expect(backoff.delay(attempt: 1, serverAsked: 1e12) == Backoff.longestServerWait)
    }

    @Test("the census follows records as they change, without visiting every account")
    func census() {
        let census = AccountCensus()
        let now = Date()
        var a = AccountRecord(did: "did:plc:a", pds: "https://pds.example", authKind: .appPassword)
        var b = AccountRecord(did: "did:plc:b", pds: "https://pds.example", authKind: .oauth,
                              oauth: OAuthSessionInfo(issuer: "https://auth.example", tokenEndpoint: "https://auth.example/token",
                                                      revocationEndpoint: nil, scope: "atproto", sessionStartedAt: now.addingTimeInterval(-13 * 86400),
                                                      clientKind: .loopback, clientID: "http://localhost"))
        census.add(a)
        census.add(b)
        #expect(census.count(.active) == 2 && census.sessionsEndingSoon(now: now) == 1)
        let before = a
        a.state = .retrying
        census.change(from: before, to: a)
        #expect(census.count(.active) == 1 && census.count(.retrying) == 1)
        let old = b
        b.state = .needsLogin
        census.change(from: old, to: b)
        #expect(census.count(.needsLogin) == 1 && census.sessionsEndingSoon(now: now) == 0, "a session needing a login is not 'ending'")
        census.remove(b)
        census.remove(a)
        #expect(census.count(.active) == 0 && census.count(.retrying) == 0 && census.count(.needsLogin) == 0)
    }
}

extension SessionError {
    var isRejection: Bool {
        switch self {
        case .rejected, .expiredToken, .authenticationFailed, .authFactorTokenRequired: true
        default: false
        }
    }
}
