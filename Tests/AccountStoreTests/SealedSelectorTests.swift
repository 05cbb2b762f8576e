import AccountStoreCore
import BlueskyTesting
import Crypto
import Foundation
import Testing

/// The seal covers what picks an account (its handle, whether that is verified, whether it is
/// the default) and its OAuth client, not only where its tokens go: someone who can write the
/// database but has no key can neither give one account another's name nor make it the default.
/// Every write that changes those columns seals them from the row as it is, and never over a
/// seal that failed.
@Suite("Seals over the handle, the verified flag, the default flag and the OAuth client", .timeLimit(.minutes(2)))
struct SealedSelectorTests {
    static let rewrites: [(column: String, sql: String)] = [
        ("handle", "handle = 'victim.example.test'"),
        ("handle_verified", "handle_verified = NOT handle_verified"),
        ("is_default", "is_default = NOT is_default"),
        ("oauth_client_key_id", "oauth_client_key_id = 'attacker-key'"),
    ]

    @Test("a column that picks the account, changed without the key, reads as tampered; its secrets are refused",
          arguments: [StoreBackend.sqlite, .postgresql])
    func selectorRewritten(backend: StoreBackend) async throws {
        let opened = try await backend.open()
        let store = opened.store
        for (column, assignment) in Self.rewrites {
            var record = Fixtures.record()
            record.authKind = .oauth
            record.oauth = OAuthSessionInfo(
                issuer: "https://auth.example.test", tokenEndpoint: "https://auth.example.test/oauth/token",
                revocationEndpoint: nil, scope: "atproto", sessionStartedAt: Date(), clientKind: .confidential,
                clientID: "https://app.example.test/client-metadata.json", clientKeyID: "key-1")
            try await store.insert(record, secrets: Fixtures.secrets())
            try await TenancyTests.rewrite(opened, "UPDATE account SET \(assignment) WHERE did = '\(record.did)'")
            let read = try #require(try await store.account(id: record.id))
            #expect(read.isAltered && read.sealCheck == .tampered, "\(column)")
            await #expect(throws: StoreError.recordAltered(account: record.id), "\(column)") {
                try await store.secrets(for: record.id)
            }
        }
        await opened.close()
    }

    @Test("""
        the seal of an older blueskyd (not over the handle or default) reads as unsealed, not as a seal that holds; \
        store reseal lists it as such, seals it and writes its secrets in the format that says it had a seal
        """, arguments: [StoreBackend.sqlite, .postgresql])
    func olderSeal(backend: StoreBackend) async throws {
        let key = SymmetricKey(size: .bits256)
        let opened = try await backend.open(key: key)
        let store = opened.store
        let record = Fixtures.record()
        try await store.insert(record, secrets: Fixtures.secrets())
        let hex = Self.versionOneSeal(record, tenant: opened.tenant ?? "", key: key).map { String(format: "%02x", $0) }.joined()
        let literal = opened.directory != nil ? "X'\(hex)'" : "'\\x\(hex)'::bytea"
        try await TenancyTests.rewrite(opened, "UPDATE account SET metadata_seal = \(literal) WHERE did = '\(record.did)'")
        let read = try #require(try await store.account(id: record.id))
        #expect(read.isAltered && read.sealCheck == .unsealed)
        #expect(try await store.unsealedAccounts().map(\.finding) == [.olderSeal])
        #expect(try await store.sealAccounts([record.id], at: Date()) == [record.id])
        #expect(try await store.account(id: record.id)?.isAltered == false)
        #expect(try await store.unsealedAccounts().isEmpty)
        // Sealed once more: removing the new seal is now seen for what it is.
        try await TenancyTests.rewrite(opened, "UPDATE account SET metadata_seal = NULL WHERE did = '\(record.did)'")
        #expect(try await store.unsealedAccounts().map(\.finding) == [.sealRemoved])
        await opened.close()
    }

    @Test("""
        setting, moving and clearing the default, and adding an account as the default, leave every row sealed; \
        a login never takes the caller's default flag; a row whose seal fails is not made the default, and losing \
        the flag does not bless it
        """, arguments: [StoreBackend.sqlite, .postgresql])
    func defaultChangesReseal(backend: StoreBackend) async throws {
        let opened = try await backend.open()
        let store = opened.store
        let (a, b) = (Fixtures.record(), Fixtures.record())
        try await store.insert(a, secrets: Fixtures.secrets())
        try await store.insert(b, secrets: Fixtures.secrets())
        func sealed(_ record: AccountRecord) async throws -> AccountRecord {
            let read = try #require(try await store.account(id: record.id))
            #expect(read.sealCheck == .holds, "\(record.did)")
            return read
        }
        try await store.setDefault(id: a.id, at: Date())
        #expect(try await sealed(a).isDefault)
        try await store.setDefault(id: b.id, at: Date())
        #expect(try await sealed(a).isDefault == false)
        #expect(try await sealed(b).isDefault)
        let c = Fixtures.record(isDefault: true)
        try await store.insert(c, secrets: Fixtures.secrets())
        #expect(try await sealed(b).isDefault == false)
        #expect(try await sealed(c).isDefault)
        // A login of `a` whose record says default: the row keeps its own flag, sealed.
        var login = try await sealed(a)
        login.isDefault = true
        _ = try await store.replaceSession(login, secrets: Fixtures.secrets())
        #expect(try await sealed(a).isDefault == false)
        #expect(try await sealed(c).isDefault)
        try await store.clearDefault(at: Date())
        #expect(try await sealed(c).isDefault == false)

        // `b` tampered with: never made the default; clearing its (forged) flag leaves it failing.
        try await TenancyTests.rewrite(opened, "UPDATE account SET pds = 'https://pds.attacker.test' WHERE did = '\(b.did)'")
        await #expect(throws: StoreError.recordAltered(account: b.id)) { try await store.setDefault(id: b.id, at: Date()) }
        try await TenancyTests.rewrite(opened, "UPDATE account SET is_default = true WHERE did = '\(b.did)'")
        try await store.setDefault(id: a.id, at: Date())
        let forged = try #require(try await store.account(id: b.id))
        #expect(!forged.isDefault && forged.sealCheck == .tampered)
        #expect(try await sealed(a).isDefault)
        // A new login of the tampered row mends it, without the default it was given.
        try await TenancyTests.rewrite(opened, "UPDATE account SET is_default = false WHERE did = '\(a.did)'")
        try await TenancyTests.rewrite(opened, "UPDATE account SET is_default = true WHERE did = '\(b.did)'")
        _ = try await store.replaceSession(b, secrets: Fixtures.secrets())
        #expect(try await sealed(b).isDefault == false)
        await opened.close()
    }

    @Test("""
        a refresh that renames the account seals the new handle, unverified; over a row whose seal fails it is \
        refused before anything is written
        """, arguments: [StoreBackend.sqlite, .postgresql])
    func renameReseals(backend: StoreBackend) async throws {
        let opened = try await backend.open()
        let store = opened.store
        let record = Fixtures.record()
        try await store.insert(record, secrets: Fixtures.secrets())
        let version = try await store.saveRefreshedSession(
            id: record.id, secrets: Fixtures.secrets(), accessExpiresAt: nil, refreshExpiresAt: nil, scope: nil,
            handle: "renamed.example.test", at: Date(), replacing: record.secretsVersion)
        let renamed = try #require(try await store.account(id: record.id))
        #expect(renamed.sealCheck == .holds && renamed.handle == "renamed.example.test" && !renamed.handleVerified)

        try await TenancyTests.rewrite(opened, "UPDATE account SET handle_verified = true WHERE did = '\(record.did)'")
        await #expect(throws: StoreError.recordAltered(account: record.id)) {
            _ = try await store.saveRefreshedSession(
                id: record.id, secrets: Fixtures.secrets(), accessExpiresAt: nil, refreshExpiresAt: nil, scope: nil,
                handle: "again.example.test", at: Date(), replacing: version)
        }
        let after = try #require(try await store.account(id: record.id))
        #expect(after.secretsVersion == version && after.handle == "renamed.example.test" && after.sealCheck == .tampered)
        await opened.close()
    }

    /// The 32-byte seal blueskyd wrote before the handle and default were sealed: an HMAC, under
    /// the key derived for seals, over the routing fields only.
    static func versionOneSeal(_ record: AccountRecord, tenant: String, key: SymmetricKey) -> Data {
        let metadataKey = HKDF<SHA256>.deriveKey(inputKeyMaterial: key, info: Data("blueskyd/account-metadata/v1".utf8),
                                                 outputByteCount: 32)
        var data = Data("blueskyd/account-metadata/v1".utf8)
        func field(_ value: String?) {
            guard let value else { return data.append(contentsOf: [0xFF, 0xFF, 0xFF, 0xFF]) }
            withUnsafeBytes(of: UInt32(value.utf8.count).bigEndian) { data.append(contentsOf: $0) }
            data.append(contentsOf: value.utf8)
        }
        withUnsafeBytes(of: record.id.uuid) { data.append(contentsOf: $0) }
        for value in [tenant, record.authKind.rawValue, record.did, record.pds, record.oauth?.issuer,
                      record.oauth?.tokenEndpoint, record.oauth?.revocationEndpoint] {
            field(value)
        }
        return Data(HMAC<SHA256>.authenticationCode(for: data, using: metadataKey))
    }
}
