import AccountStoreCore
import Foundation
import Testing
@testable import BlueskyDaemon

/// A start's loading, over the in-memory store, which hands its rows newest first: the order a
/// start must not depend on.
@Suite("A start's loading, whatever order the rows come in")
struct StartLoadTests {
    @Test("of rows that hold one verified handle, the newest account names it; every account is registered")
    func newestKeepsHandle() async throws {
        let fixture = try CoreFixture()
        let base = fixture.clock.now
        func add(_ name: String, handle: String, createdAfter seconds: TimeInterval) async throws -> AccountRecord {
            let did = "did:plc:\(name)"
            let record = AccountRecord(did: did, handle: handle, handleVerified: true, pds: ScriptedPDS.url, authKind: .appPassword,
                                       createdAt: base.addingTimeInterval(seconds), lastRefreshAt: base,
                                       accessExpiresAt: base.addingTimeInterval(3600))
            try await fixture.store.insert(record, secrets: fixture.pds.issue(did: did, expiresIn: 3600))
            return record
        }
        // Four rows claim one handle (an old verification kept through a DNS outage beside newer ones).
        var claimants: [AccountRecord] = []
        for (index, seconds) in [1.0, 3.0, 0.0, 2.0].enumerated() {
            claimants.append(try await add("claimant\(index)", handle: "same.test", createdAfter: seconds))
        }
        let other = try await add("other", handle: "other.test", createdAfter: 5)
        try await fixture.manager.loadAll()
        let registry = fixture.environment.registry
        #expect(registry.count == 5)
        #expect(try registry.session("same.test").id == claimants[1].id, "the account created last names the handle")
        #expect(try registry.session("other.test").id == other.id)
        for claimant in claimants {
            #expect(try registry.session(claimant.did).id == claimant.id, "each claimant is found by its DID")
        }
    }
}
