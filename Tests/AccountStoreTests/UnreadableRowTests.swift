import AccountStoreCore
import BlueskyTesting
import Foundation
import Testing

/// One row damaged by someone writing the database without the key costs that account, never
/// the host: a value blueskyd cannot read makes the row tampered (it stopped every start with
/// "cannot load the accounts"), and a row whose secrets do not open is not taken for a wrong
/// key (it stopped the start with "put the original key back").
@Suite("Rows blueskyd cannot read whole", .timeLimit(.minutes(2)))
struct UnreadableRowTests {
    static let damages: [(what: String, sql: String)] = [
        ("state", "state = 'bogus'"),
        ("auth_kind", "auth_kind = 'bogus'"),
        ("OAuth session columns", "oauth_issuer = 'https://auth.intruder.test'"),
    ]

    @Test("""
        a row with an unknown state or auth kind, or OAuth columns set in part, reads as tampered: listed, its \
        secrets refused, shown by store reseal as unreadable and never sealed; the other rows and the key check are \
        untouched
        """, arguments: [StoreBackend.sqlite, .postgresql])
    func damagedRowIsTampered(backend: StoreBackend) async throws {
        let opened = try await backend.open()
        let store = opened.store
        let healthy = Fixtures.record()
        try await store.insert(healthy, secrets: Fixtures.secrets())
        for (what, assignment) in Self.damages {
            var record = Fixtures.record()
            record.handle = "damaged-\(UUID().uuidString.prefix(6).lowercased()).example.test"
            record.handleVerified = true
            try await store.insert(record, secrets: Fixtures.secrets())
            try await TenancyTests.rewrite(opened, "UPDATE account SET \(assignment) WHERE did = '\(record.did)'")

            let listed = try await store.accounts(after: nil, limit: 100)
            let read = try #require(listed.first { $0.id == record.id }, "\(what): listed")
            #expect(read.isAltered && read.sealCheck == .tampered && !read.handleVerified, "\(what)")
            #expect(read.did == record.did && read.handle == record.handle && read.pds == record.pds, "\(what): still found")
            #expect(try await store.account(did: record.did)?.isAltered == true, "\(what)")
            #expect(listed.first { $0.id == healthy.id }?.isAltered == false, "\(what): the other row is untouched")
            await #expect(throws: StoreError.recordAltered(account: record.id), "\(what)") {
                try await store.secrets(for: record.id)
            }
            let unsealed = try #require(try await store.unsealedAccounts().first { $0.record.id == record.id }, "\(what)")
            #expect(unsealed.finding == .unreadable && !unsealed.mayBeSealed, "\(what)")
            #expect(unsealed.explanation.contains(what), "\(what): \(unsealed.explanation)")
            #expect(try await store.sealAccounts([record.id], at: Date()).isEmpty, "\(what): never sealed")
            #expect(try await store.account(id: record.id)?.isAltered == true, "\(what)")
            try await store.verifyKey()
            // A new login mends it, as any tampered row (the login writes every column it reads).
            try await store.delete(id: record.id)
        }
        await opened.close()
    }

    @Test("""
        the oldest row's secrets replaced by another row's: the key check still passes (the row's seal, or another \
        row, proves the key), that row's secrets are refused; another key is still found
        """, arguments: [StoreBackend.sqlite, .postgresql])
    func swappedSecretsAreNotAWrongKey(backend: StoreBackend) async throws {
        let opened = try await backend.open()
        let store = opened.store
        let (oldest, other) = (Fixtures.record(), Fixtures.record(createdAt: Date().addingTimeInterval(1)))
        try await store.insert(oldest, secrets: Fixtures.secrets())
        try await store.insert(other, secrets: Fixtures.secrets())
        try await TenancyTests.rewrite(opened, """
            UPDATE account SET sealed_secrets = (SELECT sealed_secrets FROM account WHERE did = '\(other.did)')
            WHERE did = '\(oldest.did)'
            """)
        try await store.verifyKey()  // the oldest row's seal holds: the key is right
        await #expect(throws: StoreError.secretDoesNotOpen(account: oldest.id)) { try await store.secrets(for: oldest.id) }
        // Its seal gone too: the next row proves the key.
        try await TenancyTests.rewrite(opened, "UPDATE account SET metadata_seal = NULL WHERE did = '\(oldest.did)'")
        try await store.verifyKey()
        await store.close()

        let reopened = try await backend.open(reuse: opened)  // a new random key
        await #expect {
            try await reopened.store.verifyKey()
        } throws: { error in
            error as? StoreError == .secretDoesNotOpen(account: oldest.id)
        }
        await reopened.close()
        opened.directory?.remove()
    }
}
