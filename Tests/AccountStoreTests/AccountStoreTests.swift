import AccountStoreCore
import Crypto
import Foundation
import Testing

@Suite("Account registry")
struct AccountStoreTests {
    @Test("insert, list and open secrets round trip")
    func roundTrip() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try Fixtures.openStore(in: directory.url, key: SymmetricKey(size: .bits256))
        let base = Date()
        let first = Fixtures.record(handle: "alice.test", createdAt: base)
        var second = Fixtures.record(handle: "bob.test", createdAt: base.addingTimeInterval(1))
        second.authKind = .oauth
        second.accessExpiresAt = base.addingTimeInterval(7200.123456)
        let firstSecrets = Fixtures.secrets()
        let secondSecrets = AccountSecrets(accessToken: "a2", refreshToken: "r2", dpopPrivateKey: Data([1, 2, 3]))
        // Inserted newest first: the listing must still be oldest first.
        try await store.insert(second, secrets: secondSecrets)
        try await store.insert(first, secrets: firstSecrets)

        #expect(try await store.allAccounts() == [first, second])
        #expect(try await store.count() == 2)
        #expect(try await store.account(id: second.id) == second)
        #expect(try await store.account(did: first.did) == first)
        #expect(try await store.accounts(handle: "bob.test") == [second])
        #expect(try await store.accounts(handle: "nobody.test").isEmpty)
        #expect(try await store.account(id: UUID()) == nil)
        #expect(try await store.secrets(for: first.id) == firstSecrets)
        #expect(try await store.secrets(for: second.id) == secondSecrets)
    }

    @Test("reopening the store keeps accounts, secrets and the default")
    func reopenKeepsEverything() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let key = SymmetricKey(size: .bits256)
        let record = Fixtures.record()
        let secrets = Fixtures.secrets()
        let madeDefaultAt = record.createdAt.addingTimeInterval(60)
        do {
            let store = try Fixtures.openStore(in: directory.url, key: key)
            try await store.insert(record, secrets: secrets)
            try await store.setDefault(id: record.id, at: madeDefaultAt)
            await store.close()
        }
        let reopened = try Fixtures.openStore(in: directory.url, key: key)
        var expected = record
        expected.isDefault = true
        expected.updatedAt = madeDefaultAt
        #expect(try await reopened.allAccounts() == [expected])
        #expect(try await reopened.defaultAccount()?.id == record.id)
        #expect(try await reopened.secrets(for: record.id) == secrets)
    }

    @Test("a duplicate DID is refused and names the existing account")
    func duplicateDID() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try Fixtures.openStore(in: directory.url, key: SymmetricKey(size: .bits256))
        let original = Fixtures.record(did: "did:plc:duplicate")
        try await store.insert(original, secrets: Fixtures.secrets())

        let error = await #expect(throws: StoreError.self) {
            try await store.insert(Fixtures.record(did: "did:plc:duplicate"), secrets: Fixtures.secrets())
        }
        #expect(error == .duplicateDID(existing: original.id))
        #expect(error?.description.contains(original.id.uuidString.lowercased()) == true)
        #expect(try await store.count() == 1)
    }

    @Test("only one account is the default at a time")
    func setDefaultIsExclusive() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try Fixtures.openStore(in: directory.url, key: SymmetricKey(size: .bits256))
        let accounts = (0..<3).map { Fixtures.record(createdAt: Date().addingTimeInterval(Double($0))) }
        for account in accounts { try await store.insert(account, secrets: Fixtures.secrets()) }
        #expect(try await store.defaultAccount() == nil)

        for account in accounts + [accounts[0]] {
            try await store.setDefault(id: account.id)
            #expect(try await store.defaultAccount()?.id == account.id)
            #expect(try await store.allAccounts().filter(\.isDefault).map(\.id) == [account.id])
        }

        // Inserting a new default takes over, too.
        let newcomer = Fixtures.record(isDefault: true)
        try await store.insert(newcomer, secrets: Fixtures.secrets())
        #expect(try await store.allAccounts().filter(\.isDefault).map(\.id) == [newcomer.id])

        await #expect(throws: StoreError.unknownAccount(newcomer.id.successor)) {
            try await store.setDefault(id: newcomer.id.successor)
        }
    }

    @Test("deleting the default account leaves no default")
    func deleteDefault() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try Fixtures.openStore(in: directory.url, key: SymmetricKey(size: .bits256))
        let kept = Fixtures.record()
        let removed = Fixtures.record()
        try await store.insert(kept, secrets: Fixtures.secrets())
        try await store.insert(removed, secrets: Fixtures.secrets())
        try await store.setDefault(id: removed.id)

        let deleted = try await store.delete(id: removed.id)
        #expect(deleted.id == removed.id)
        #expect(deleted.isDefault)
        #expect(try await store.defaultAccount() == nil)
        #expect(try await store.allAccounts().map(\.id) == [kept.id])
        await #expect(throws: StoreError.unknownAccount(removed.id)) { try await store.secrets(for: removed.id) }
        await #expect(throws: StoreError.unknownAccount(removed.id)) { try await store.delete(id: removed.id) }
    }

    @Test("an identity save changes the handle and PDS but neither secrets nor the default flag")
    func identitySave() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try Fixtures.openStore(in: directory.url, key: SymmetricKey(size: .bits256))
        let record = Fixtures.record(handle: "old.test")
        let secrets = Fixtures.secrets()
        try await store.insert(record, secrets: secrets)

        var changed = record
        changed.handle = "new.test"
        changed.handleVerified = false
        changed.pds = "https://other-pds.example.test"
        changed.isDefault = true
        changed.updatedAt = record.updatedAt.addingTimeInterval(5)
        try await store.saveIdentity(changed)

        var expected = changed
        expected.isDefault = false
        #expect(try await store.account(id: record.id) == expected)
        #expect(try await store.accounts(handle: "new.test").map(\.id) == [record.id])
        #expect(try await store.secrets(for: record.id) == secrets)
        let unknown = Fixtures.record()
        await #expect(throws: StoreError.unknownAccount(unknown.id)) { try await store.saveIdentity(unknown) }
    }

    @Test("a refresh: write-ahead mark, then one commit with the new session")
    func refreshLifecycle() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try Fixtures.openStore(in: directory.url, key: SymmetricKey(size: .bits256))
        let record = Fixtures.record()
        try await store.insert(record, secrets: Fixtures.secrets())

        let started = Date()
        try await store.markRefreshStarted(id: record.id, at: started)
        #expect(try await store.account(id: record.id)?.refreshStartedAt == started)

        try await store.markState(id: record.id, state: .retrying, reason: "connection reset")
        let retrying = try #require(try await store.account(id: record.id))
        #expect(retrying.state == .retrying)
        #expect(retrying.stateReason == "connection reset")
        #expect(retrying.refreshStartedAt == started, "a transient failure leaves the token's fate unknown")

        let rotated = Fixtures.secrets()
        let finished = started.addingTimeInterval(1)
        let accessExpiry = finished.addingTimeInterval(7200)
        let refreshExpiry = finished.addingTimeInterval(90 * 86400)
        try await store.saveRefreshedSession(
            id: record.id, secrets: rotated,
            accessExpiresAt: accessExpiry, refreshExpiresAt: refreshExpiry, at: finished)

        let refreshed = try #require(try await store.account(id: record.id))
        #expect(refreshed.state == .active)
        #expect(refreshed.stateReason == nil)
        #expect(refreshed.refreshStartedAt == nil)
        #expect(refreshed.lastRefreshAt == finished)
        #expect(refreshed.accessExpiresAt == accessExpiry)
        #expect(refreshed.refreshExpiresAt == refreshExpiry)
        #expect(try await store.secrets(for: record.id) == rotated)

        try await store.markRefreshStarted(id: record.id, at: finished)
        try await store.markState(id: record.id, state: .needsLogin, reason: "ExpiredToken", at: finished, lease: .release)
        let refused = try #require(try await store.account(id: record.id))
        #expect(refused.state == .needsLogin)
        #expect(refused.stateReason == "ExpiredToken")
        #expect(refused.refreshStartedAt == nil)

        let missing = UUID()
        await #expect(throws: StoreError.unknownAccount(missing)) {
            try await store.saveRefreshedSession(id: missing, secrets: rotated, accessExpiresAt: nil, refreshExpiresAt: nil, at: finished)
        }
        await #expect(throws: StoreError.unknownAccount(missing)) { try await store.markRefreshStarted(id: missing, at: finished) }
    }

    @Test("a batch with a repeated DID inserts nothing")
    func batchIsAllOrNothing() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try Fixtures.openStore(in: directory.url, key: SymmetricKey(size: .bits256))
        let first = Fixtures.record(did: "did:plc:same")
        let batch = [
            (record: Fixtures.record(), secrets: Fixtures.secrets()),
            (record: first, secrets: Fixtures.secrets()),
            (record: Fixtures.record(did: "did:plc:same"), secrets: Fixtures.secrets()),
        ]
        await #expect(throws: StoreError.duplicateDID(existing: first.id)) {
            try await store.insert(contentsOf: batch)
        }
        #expect(try await store.count() == 0)
    }

    @Test("100,000 accounts in batches: all listed in order, any one opens")
    func hundredThousandAccounts() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try Fixtures.openStore(in: directory.url, key: SymmetricKey(size: .bits256))
        let total = 100_000
        let batchSize = 10_000
        let base = Date()
        var sample: (AccountRecord, AccountSecrets)?
        for batchStart in stride(from: 0, to: total, by: batchSize) {
            let batch = (batchStart..<batchStart + batchSize).map { index in
                let record = AccountRecord(
                    did: "did:plc:bench\(index)", handle: "bench\(index).test", pds: "https://pds.example.test",
                    authKind: .appPassword, createdAt: base.addingTimeInterval(Double(index)))
                return (record: record, secrets: AccountSecrets(accessToken: "a\(index)", refreshToken: "r\(index)"))
            }
            if batchStart == 50_000 { sample = batch[1234] }
            try await store.insert(contentsOf: batch)
        }
        #expect(try await store.count() == total)
        let all = try await store.allAccounts()
        #expect(all.count == total)
        #expect(all.first?.did == "did:plc:bench0")
        #expect(all.last?.did == "did:plc:bench\(total - 1)")
        let (record, secrets) = try #require(sample)
        #expect(try await store.account(did: record.did) == record)
        #expect(try await store.accounts(handle: record.handle!) == [record])
        #expect(try await store.secrets(for: record.id) == secrets)
    }
}

extension UUID {
    /// A different, deterministic UUID (for "unknown account" checks).
    var successor: UUID {
        var bytes = uuid
        bytes.15 &+= 1
        return UUID(uuid: bytes)
    }
}
