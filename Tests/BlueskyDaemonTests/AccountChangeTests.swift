import AccountStoreCore
import Foundation
import Testing

@testable import BlueskyDaemon

@Suite("Which events a change of an account's record stands for")
struct AccountChangeTests {
    private let base = AccountRecord(did: "did:plc:alice", handle: "alice.test", handleVerified: true,
                                     pds: "https://pds.one.test", authKind: .appPassword,
                                     lastRefreshAt: Date(timeIntervalSince1970: 1_000))

    private func kinds(_ new: AccountRecord, from old: AccountRecord? = nil, newSession: Bool = false) -> [String] {
        AccountChange.between(old ?? base, new, newSession: newSession, retryAt: nil).map(\.kind.rawValue)
    }

    @Test("a refresh, a failure without a verdict, a verdict, and recovery without a refresh")
    func states() {
        var refreshed = base
        refreshed.lastRefreshAt = Date(timeIntervalSince1970: 2_000)
        #expect(kinds(refreshed) == ["account.refreshed"])
        var retrying = base
        (retrying.state, retrying.stateReason) = (.retrying, "HTTP 502")
        #expect(kinds(retrying) == ["account.retrying"])
        var again = retrying
        again.stateReason = "HTTP 429"
        #expect(kinds(again, from: retrying) == ["account.retrying"], "a new reason is news")
        #expect(kinds(retrying, from: retrying).isEmpty, "the same failure again is not")
        #expect(kinds(base, from: retrying) == ["account.recovered"])
        var ended = base
        (ended.state, ended.stateReason) = (.needsLogin, "revoked")
        #expect(kinds(ended) == ["account.needsLogin"])
        #expect(kinds(base, from: ended, newSession: true).isEmpty, "a new login says login.completed itself")
    }

    @Test("moves, handles, the default flag and the profile, in that order")
    func identityAndFlags() {
        var changed = base
        changed.pds = "https://pds.two.test"
        changed.handle = "alice2.test"
        changed.handleVerified = false
        changed.isDefault = true
        changed.profile = AccountProfile(displayName: "Alice", avatar: nil, description: nil, fetchedAt: Date())
        #expect(kinds(changed) == ["account.moved", "account.handleChanged", "account.defaultChanged", "account.profileUpdated"])
        var notDefault = base
        notDefault.isDefault = false
        var wasDefault = base
        wasDefault.isDefault = true
        #expect(kinds(notDefault, from: wasDefault).isEmpty, "losing the default is told by the new default's event")
        var refetched = changed
        refetched.profile?.fetchedAt = Date().addingTimeInterval(60)
        #expect(kinds(refetched, from: changed).isEmpty, "the same profile fetched again is no news")
    }
}
