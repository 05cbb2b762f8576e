import AccountStoreCore
import BlueskyTesting
import Foundation
import PostgresStore
import Synchronization
import Testing

/// A claim of a lease nobody holds is one statement (`claimRefreshAlone`); any other is decided
/// over a read of the row, and the lease written only while the row is still as read
/// (`claimRefreshByRead`). These change the row between that read and its write
/// (`claimRaceHook`), where a claim that wrote over what it read would hand out a second lease
/// or miss a rotation, and check that the one statement grants only what the read would.
@Suite("A claim in one statement, and a claim whose row changes between its read and its write")
struct SharedClaimRaceTests {
    private func withTwoHosts(_ body: (_ a: PostgresAccountStore, _ b: PostgresAccountStore, _ account: AccountRecord)
        async throws -> Void) async throws {
        try await SharedTestDatabase.withTwoHosts(leaseDuration: 60) { a, b in
            let account = Fixtures.record()
            try await a.insert(account, secrets: Fixtures.secrets())
            try await body(a, b, account)
        }
    }

    /// Runs `change` once, at host `store`'s next claim, between its read and its write; a
    /// change that fails fails the test.
    private func once(_ store: PostgresAccountStore, _ change: @escaping @Sendable () async throws -> Void) {
        let fired = Mutex(false)
        store.claimRaceHook.withLock { hook in
            hook = {
                guard fired.withLock({ done in defer { done = true }; return !done }) else { return }
                do { try await change() } catch { Issue.record("the change between the read and the write failed: \(error)") }
            }
        }
    }

    /// Claims of `store` that went the locked way.
    private func locked(_ store: PostgresAccountStore) -> Int { store.lockedClaims.load(ordering: .relaxed) }

    @Test("another host's claim in between: this one is told the lease is held, and only one host holds it")
    func otherHostClaimsInBetween() async throws {
        try await withTwoHosts { (a, b, record) async throws in
            let now = Date()
            let bClaim = Mutex<RefreshClaim?>(nil)
            once(a) {
                let claim = try await b.claimRefresh(id: record.id, expecting: 1, at: now)
                bClaim.withLock { $0 = claim }
            }
            let aClaim = try await a.claimRefreshByRead(id: record.id, expecting: 1, at: now)
            #expect(locked(a) == 1, "the compare-and-set saw the change and the claim went the locked way")
            #expect(bClaim.withLock { $0 } == .granted(interruptedAt: nil))
            guard case .held(let holder, _) = aClaim else { Issue.record("expected held, got \(aClaim)"); return }
            #expect(holder == b.leaseOwner)
            #expect(try await a.refreshLease(id: record.id)?.owner == b.leaseOwner)
        }
    }

    @Test("another host's refresh saved in between: this one is told its tokens are superseded, and the new ones stay")
    func otherHostSavesInBetween() async throws {
        try await withTwoHosts { (a, b, record) async throws in
            let now = Date()
            let rotated = Fixtures.secrets()
            once(a) {
                _ = try await b.claimRefresh(id: record.id, expecting: 1, at: now)
                _ = try await b.saveRefreshedSession(id: record.id, secrets: rotated, accessExpiresAt: nil,
                                                     refreshExpiresAt: nil, at: now, replacing: 1)
            }
            #expect(try await a.claimRefreshByRead(id: record.id, expecting: 1, at: now) == .superseded(version: 2))
            #expect(locked(a) == 1)
            #expect(try await a.refreshLease(id: record.id) == nil, "no lease left behind over the new tokens")
            #expect(try await a.secrets(for: record.id) == rotated)
        }
    }

    @Test("a change that leaves the lease and tokens as read (the schedule's take) does not stop the grant")
    func unrelatedChangeInBetween() async throws {
        try await withTwoHosts { (a, b, record) async throws in
            let now = Date()
            try await b.setRefreshDue([ScheduledDate(id: record.id, due: now, version: 1)])
            let taken = Mutex(0)
            once(a) {
                let count = try await b.takeDueRefreshes(limit: 10, at: now.addingTimeInterval(1), skipping: []).count
                taken.withLock { $0 = count }
            }
            #expect(try await a.claimRefreshByRead(id: record.id, expecting: 1, at: now) == .granted(interruptedAt: nil))
            #expect(taken.withLock { $0 } == 1, "the take in between took the account")
            #expect(locked(a) == 0, "granted by the compare-and-set itself")
            #expect(try await a.refreshLease(id: record.id)?.owner == a.leaseOwner)
        }
    }

    @Test("a lease, its end and its mark all set (this host's own, claimed again): the compare-and-set matches them and grants")
    func valuesNotNull() async throws {
        try await withTwoHosts { (a, _, record) async throws in
            let first = Date()
            #expect(try await a.claimRefresh(id: record.id, expecting: 1, at: first) == .granted(interruptedAt: nil))
            #expect(try await a.claimRefreshByRead(id: record.id, expecting: 1, at: first.addingTimeInterval(1))
                        == .granted(interruptedAt: first), "the first claim's mark is handed back")
            #expect(locked(a) == 0)
        }
    }

    /// Claims of `store` granted by the one statement.
    private func alone(_ store: PostgresAccountStore) -> Int { store.aloneClaims.load(ordering: .relaxed) }

    @Test("a lease nobody holds: granted by the one statement; the other host is then told it is held, by the read")
    func oneStatementGrants() async throws {
        try await withTwoHosts { (a, b, record) async throws in
            let now = Date()
            #expect(try await a.claimRefresh(id: record.id, expecting: 1, at: now) == .granted(interruptedAt: nil))
            #expect(alone(a) == 1)
            #expect(try await b.claimRefreshAlone(id: record.id, expecting: 1, at: now) == nil, "another host's lease: nothing written")
            guard case .held(let holder, _) = try await b.claimRefresh(id: record.id, expecting: 1, at: now) else {
                Issue.record("expected held"); return
            }
            #expect(holder == a.leaseOwner)
            #expect(alone(b) == 0)
            #expect(try await a.refreshLease(id: record.id)?.owner == a.leaseOwner)
        }
    }

    @Test("this host's own lease claimed again: the one statement grants it and hands back the first claim's mark")
    func oneStatementHandsBackTheMark() async throws {
        try await withTwoHosts { (a, _, record) async throws in
            let first = Date()
            #expect(try await a.claimRefresh(id: record.id, expecting: 1, at: first) == .granted(interruptedAt: nil))
            #expect(try await a.claimRefresh(id: record.id, expecting: 1, at: first.addingTimeInterval(1))
                        == .granted(interruptedAt: first))
            #expect(try await a.claimRefresh(id: record.id, expecting: 1, at: first.addingTimeInterval(2))
                        == .granted(interruptedAt: first.addingTimeInterval(1)), "each grant wrote its own mark")
            #expect(alone(a) == 3)
        }
    }

    @Test("newer tokens than expected: the one statement writes nothing, and the read says superseded")
    func oneStatementLeavesNewerTokens() async throws {
        try await withTwoHosts { (a, _, record) async throws in
            let now = Date()
            #expect(try await a.claimRefreshAlone(id: record.id, expecting: 0, at: now) == nil)
            #expect(try await a.refreshLease(id: record.id) == nil, "no lease written over tokens it did not expect")
            #expect(try await a.claimRefresh(id: record.id, expecting: 0, at: now) == .superseded(version: 1))
            #expect(alone(a) == 0)
        }
    }

    @Test("a mark left (with no lease) while the one statement waits for the row: the grant hands back that mark, as the row was just before it")
    func oneStatementWaitsForTheRow() async throws {
        try await withTwoHosts { (a, _, record) async throws in
            let server = try await SharedTestDatabase.server
            let mark = Date(storedSeconds: Date().addingTimeInterval(-30).storedSeconds.rounded())
            let id = record.id.uuidString.lowercased()
            // Another session holds the row, then leaves a mark with no lease (a refresh given
            // back keeping its mark) and commits.
            let holder = Task {
                try await server.run("""
                    BEGIN;
                    SELECT 1 FROM account WHERE id = '\(id)' FOR UPDATE;
                    SELECT pg_sleep(4);
                    UPDATE account SET refresh_started_at = \(mark.storedSeconds) WHERE id = '\(id)';
                    COMMIT;
                    """)
            }
            let holding = try await eventually(timeout: .seconds(20)) {
                try await server.run("""
                    SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(4)%' AND state = 'active'
                    """) == "1"
            }
            #expect(holding, "the other session holds the row")
            let started = ContinuousClock.now
            let claim = try await a.claimRefreshAlone(id: record.id, expecting: 1, at: Date())
            let waited = ContinuousClock.now - started
            _ = try await holder.value
            #expect(waited > .milliseconds(500), "the claim waited for the row (\(waited))")
            #expect(claim == .granted(interruptedAt: mark), "the mark as the other session left it")
        }
    }

    @Test("two hosts claiming the same free lease at once, 20 times: exactly one is granted each time")
    func oneStatementAtOnce() async throws {
        try await withTwoHosts { (a, b, _) async throws in
            for round in 0..<20 {
                let record = Fixtures.record(did: "did:plc:race\(round)")
                try await a.insert(record, secrets: Fixtures.secrets())
                let now = Date()
                async let fromA = a.claimRefresh(id: record.id, expecting: 1, at: now)
                async let fromB = b.claimRefresh(id: record.id, expecting: 1, at: now)
                let claims = try await [fromA, fromB]
                #expect(claims.filter { $0 == .granted(interruptedAt: nil) }.count == 1, "round \(round): \(claims)")
                let winner = claims[0] == .granted(interruptedAt: nil) ? a.leaseOwner : b.leaseOwner
                let loser = claims[0] == .granted(interruptedAt: nil) ? claims[1] : claims[0]
                guard case .held(let holder, _) = loser else { Issue.record("round \(round): the other got \(loser)"); continue }
                #expect(holder == winner)
                #expect(try await a.refreshLease(id: record.id)?.owner == winner)
            }
        }
    }

    @Test("the locked way gives the same verdicts as the read-then-write way")
    func lockedWayAgrees() async throws {
        try await withTwoHosts { (a, b, record) async throws in
            let now = Date()
            #expect(try await a.claimRefreshLocked(id: record.id, expecting: 1, at: now) == .granted(interruptedAt: nil))
            guard case .held(let holder, _) = try await b.claimRefreshLocked(id: record.id, expecting: 1, at: now) else {
                Issue.record("expected held"); return
            }
            #expect(holder == a.leaseOwner)
            #expect(try await a.claimRefreshLocked(id: record.id, expecting: 0, at: now) == .superseded(version: 1))
        }
    }

    @Test("accounts read by ids in one query: those that exist, in any order, the missing left out")
    func accountsByIDs() async throws {
        try await withTwoHosts { (a, b, record) async throws in
            let second = Fixtures.record()
            try await b.insert(second, secrets: Fixtures.secrets())
            let found = try await a.accounts(ids: [second.id, UUID(), record.id])
            #expect(Set(found.map(\.id)) == [record.id, second.id])
            #expect(try await a.accounts(ids: []).isEmpty)
        }
    }
}
