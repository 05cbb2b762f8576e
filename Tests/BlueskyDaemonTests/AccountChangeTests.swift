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

    @Test("a record whose seal does not hold says account.tampered (with what was found) before needs-login, once")
    func tampered() {
        let tampered = base.markedAltered(.tampered), unsealed = base.markedAltered(.unsealed)
        #expect(kinds(tampered) == ["account.tampered", "account.needsLogin"])
        #expect(AccountChange.between(base, unsealed, newSession: false, retryAt: nil).first?.fields["seal"] == "unsealed")
        #expect(kinds(tampered, from: tampered).isEmpty, "said once")
        #expect(kinds(tampered, from: unsealed) == ["account.tampered"], "a seal found broken after none is news")
        #expect(tampered.eventKeys.handle == nil, "a name the row alone claims is not the account's")
        let view = AccountView.json(tampered, nextRefreshAt: nil)
        #expect(view["handleVerified"] == false && view["tampered"] == "tampered", "shown as unverified, and why")
    }

    @Test("""
        the registry names an account by handle, or as the default, only while its row's seal holds; a stored record \
        found tampered on a running account counts in daemon.status and loses its names
        """)
    func registryIgnoresUnsealedSelectors() async throws {
        let core = try CoreFixture()
        let registry = core.environment.registry
        var record = base
        record.isDefault = true
        let session = AccountSession(record: record.markedAltered(.tampered), environment: core.environment)
        registry.insert(session, record: record.markedAltered(.tampered))
        #expect((try? registry.session("alice.test")) == nil)
        #expect((try? registry.session(nil)) == nil)
        #expect(try registry.session("did:plc:alice") === session, "still found by DID, to log in again or remove")
        #expect(registry.census.altered(limit: 5).count == 1)
        registry.recordChanged(session, from: record.markedAltered(.tampered), to: record)
        #expect(try registry.session("alice.test") === session)
        #expect(try registry.session(nil) === session)
        #expect(registry.census.altered(limit: 5).count == 0)
        registry.remove(record)

        let bob = try await core.addAccount("bob", isDefault: true)
        var stored = try await core.stored(bob)
        stored.pds = "https://pds.attacker.test"
        _ = await bob.drive(.stored(stored.markedAltered(.unsealed)))
        #expect((try? registry.session(nil)) == nil)
        #expect((try? registry.session("bob.test")) == nil)
        let status = try await core.call("daemon.status").get()
        #expect(status["tampered"]?["count"] == 1 && status["tampered"]?["unsealed"] == 1)
        #expect(status["tampered"]?["accounts"] == [["id": .string(bob.id.uuidString.lowercased()), "seal": "unsealed"]])
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
