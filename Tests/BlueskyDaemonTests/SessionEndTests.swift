@testable import BlueskyDaemon
import AccountStoreCore
import Foundation
import Testing

@Suite("Public OAuth sessions: the 48-hour warning before their fixed end")
struct SessionEndTests {
    static func record(startedDaysAgo days: Double, kind: OAuthClientKind, now: Date) -> AccountRecord {
        AccountRecord(did: "did:plc:abc", pds: "https://pds.example.test", authKind: .oauth, oauth: OAuthSessionInfo(
            issuer: "https://auth.example.test", tokenEndpoint: "https://auth.example.test/oauth/token", revocationEndpoint: nil,
            scope: "atproto", sessionStartedAt: now.addingTimeInterval(-days * 86_400), clientKind: kind, clientID: "http://localhost"))
    }

    @Test("a loopback session warns from 12 days on (2 left), a confidential one 2 days before 2 years; app-password sessions never do")
    func endsSoon() {
        let now = Date()
        #expect(!Self.record(startedDaysAgo: 11.9, kind: .loopback, now: now).sessionEndsSoon(now: now))
        #expect(Self.record(startedDaysAgo: 12.1, kind: .loopback, now: now).sessionEndsSoon(now: now))
        #expect(Self.record(startedDaysAgo: 20, kind: .hostedPublic, now: now).sessionEndsSoon(now: now))
        #expect(!Self.record(startedDaysAgo: 700, kind: .confidential, now: now).sessionEndsSoon(now: now))
        #expect(Self.record(startedDaysAgo: 728.5, kind: .confidential, now: now).sessionEndsSoon(now: now),
                "a confidential session warns before its 2-year end")
        #expect(!AccountRecord(did: "did:plc:abc", pds: "https://p", authKind: .appPassword).sessionEndsSoon(now: now))
    }

    @Test("the status line counts sessions ending within 48 hours")
    func statusLine() {
        let now = Date()
        #expect(StatusSummary.describe(accounts: 3, needsLogin: 0, nextRefresh: nil, now: now, sessionsEndingSoon: 1)
            == "3 accounts, 1 OAuth session ends within 48h; no refresh scheduled")
        #expect(StatusSummary.describe(accounts: 3, needsLogin: 1, nextRefresh: nil, now: now, sessionsEndingSoon: 2)
            == "3 accounts, 1 needs login, 2 OAuth sessions end within 48h; no refresh scheduled")
    }
}
