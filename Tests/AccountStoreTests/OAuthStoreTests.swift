import AccountStoreCore
import SQLiteStore
import Crypto
import Foundation
import Testing

@Suite("Account registry: OAuth sessions and DPoP nonces")
struct OAuthStoreTests {
    static func oauthInfo(started: Date, kind: OAuthClientKind = .loopback) -> OAuthSessionInfo {
        OAuthSessionInfo(issuer: "https://auth.example.test", tokenEndpoint: "https://auth.example.test/oauth/token",
                         revocationEndpoint: "https://auth.example.test/oauth/revoke", scope: "atproto transition:generic",
                         sessionStartedAt: started, clientKind: kind, clientID: "http://localhost?scope=atproto")
    }

    @Test("an OAuth account keeps its issuer, scope, client and session start, and its DPoP key sealed, across a reopen")
    func oauthRoundTrip() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let key = SymmetricKey(size: .bits256)
        var record = Fixtures.record()
        record.authKind = .oauth
        record.oauth = Self.oauthInfo(started: Date(timeIntervalSinceReferenceDate: 800_000_000.25))
        let secrets = AccountSecrets(accessToken: "at-\(UUID())", refreshToken: "rt-\(UUID())",
                                     dpopPrivateKey: Data((0..<32).map { UInt8($0) }))
        do {
            let store = try Fixtures.openStore(in: directory.url, key: key)
            try await store.insert(record, secrets: secrets)
            await store.close()
        }
        let store = try Fixtures.openStore(in: directory.url, key: key)
        #expect(try await store.account(id: record.id) == record)
        #expect(try await store.secrets(for: record.id) == secrets)
        #expect(record.oauth?.sessionEndsAt == record.oauth!.sessionStartedAt.addingTimeInterval(14 * 24 * 3600))
        // The key never appears in the database file in clear.
        await store.close()
        let file = try Data(contentsOf: directory.appending(SQLiteAccountStore.databaseFileName))
        #expect(file.range(of: secrets.dpopPrivateKey!) == nil)
    }

    @Test("public sessions end after 14 days, confidential ones after 2 years; app-password accounts have no OAuth facts")
    func sessionEnds() async throws {
        let start = Date()
        #expect(Self.oauthInfo(started: start, kind: .confidential).sessionEndsAt == start.addingTimeInterval(730 * 86_400))
        #expect(Self.oauthInfo(started: start, kind: .hostedPublic).sessionEndsAt == start.addingTimeInterval(14 * 86_400))
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try Fixtures.openStore(in: directory.url, key: SymmetricKey(size: .bits256))
        let record = Fixtures.record()
        try await store.insert(record, secrets: Fixtures.secrets())
        #expect(try await store.account(id: record.id)?.oauth == nil)
    }

    @Test("an app-password account upgraded in place keeps its id and default flag, with new secrets")
    func upgradeInPlace() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try Fixtures.openStore(in: directory.url, key: SymmetricKey(size: .bits256))
        let record = Fixtures.record(isDefault: true)
        let other = Fixtures.record()
        try await store.insert(record, secrets: Fixtures.secrets())
        try await store.insert(other, secrets: Fixtures.secrets())
        try await store.saveDPoPNonces([StoredDPoPNonce(account: record.id, origin: "https://pds.example.test", nonce: "old",
                                                  receivedAt: Date())])
        var upgraded = record
        upgraded.authKind = .oauth
        upgraded.oauth = Self.oauthInfo(started: Date())
        upgraded.isDefault = false  // ignored: only setDefault changes it
        let secrets = AccountSecrets(accessToken: "new-at", refreshToken: "new-rt", dpopPrivateKey: Data(repeating: 7, count: 32))
        _ = try await store.replaceSession(upgraded, secrets: secrets)
        let stored = try #require(try await store.account(id: record.id))
        #expect(stored.authKind == .oauth && stored.oauth == upgraded.oauth)
        #expect(stored.isDefault, "still the default")
        #expect(try await store.secrets(for: record.id) == secrets)
        #expect(try await store.allDPoPNonces().isEmpty, "the old session's nonces are gone")
        #expect(try await store.count() == 2)

        var clash = other
        clash.did = record.did
        await #expect(throws: StoreError.duplicateDID(existing: record.id)) { _ = try await store.replaceSession(clash, secrets: secrets) }
        await #expect(throws: StoreError.unknownAccount(UUID(uuidString: "00000000-0000-0000-0000-000000000001")!)) {
            var missing = other
            missing.id = UUID(uuidString: "00000000-0000-0000-0000-000000000001")!
            _ = try await store.replaceSession(missing, secrets: secrets)
        }
    }

    @Test("nonces are kept per account and origin, replaced by newer ones, and deleted with their account")
    func nonces() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let key = SymmetricKey(size: .bits256)
        let store = try Fixtures.openStore(in: directory.url, key: key)
        let a = Fixtures.record(), b = Fixtures.record()
        try await store.insert(a, secrets: Fixtures.secrets())
        try await store.insert(b, secrets: Fixtures.secrets())
        let t0 = Date(timeIntervalSinceReferenceDate: 800_000_000)
        try await store.saveDPoPNonces([
            StoredDPoPNonce(account: a.id, origin: "https://pds.example.test", nonce: "n1", receivedAt: t0),
            StoredDPoPNonce(account: a.id, origin: "https://auth.example.test", nonce: "m1", receivedAt: t0),
            StoredDPoPNonce(account: b.id, origin: "https://pds.example.test", nonce: "k1", receivedAt: t0),
            StoredDPoPNonce(account: UUID(), origin: "https://pds.example.test", nonce: "ghost", receivedAt: t0),
        ])
        try await store.saveDPoPNonces([StoredDPoPNonce(account: a.id, origin: "https://pds.example.test", nonce: "n2",
                                                  receivedAt: t0.addingTimeInterval(60))])
        let all = try await store.allDPoPNonces()
        #expect(all.count == 3, "the unknown account's nonce was skipped")
        #expect(all.contains(StoredDPoPNonce(account: a.id, origin: "https://pds.example.test", nonce: "n2",
                                             receivedAt: t0.addingTimeInterval(60))))
        try await store.delete(id: a.id)
        #expect(try await store.allDPoPNonces().map(\.nonce) == ["k1"])
    }

    @Test("client signing keys: sealed at rest, back after a reopen, bound to their kid, removable only when unused")
    func clientKeys() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let key = SymmetricKey(size: .bits256)
        let first = StoredClientKey(keyID: "blueskyd-one", privateKey: Data((0..<32).map { UInt8($0 + 100) }),
                                    createdAt: Date(timeIntervalSinceReferenceDate: 800_000_000))
        let second = StoredClientKey(keyID: "blueskyd-two", privateKey: Data(repeating: 9, count: 32),
                                     createdAt: Date(timeIntervalSinceReferenceDate: 800_000_100))
        var record = Fixtures.record()
        record.authKind = .oauth
        var info = Self.oauthInfo(started: Date(), kind: .confidential)
        info.clientKeyID = first.keyID
        record.oauth = info
        do {
            let store = try Fixtures.openStore(in: directory.url, key: key)
            try await store.addClientKey(second)
            try await store.addClientKey(first)
            await #expect(throws: StoreError.self) { try await store.addClientKey(first) }
            try await store.insert(record, secrets: Fixtures.secrets())
            await store.close()
        }
        let store = try Fixtures.openStore(in: directory.url, key: key)
        #expect(try await store.clientKeys() == [first, second], "oldest first")
        #expect(try await store.account(id: record.id)?.oauth?.clientKeyID == first.keyID)
        #expect(try await store.clientKeyIDsInUse() == [first.keyID])
        #expect(try await store.removeClientKey(first.keyID) == false, "a session is bound to it")
        #expect(try await store.removeClientKey(second.keyID) == true)
        #expect(try await store.clientKeys() == [first])
        await store.close()
        let file = try Data(contentsOf: directory.appending(SQLiteAccountStore.databaseFileName))
        #expect(file.range(of: first.privateKey) == nil, "never in clear")

        // Another store key cannot open it, and says which key is unreadable.
        let other = try Fixtures.openStore(in: directory.url, key: SymmetricKey(size: .bits256))
        await #expect(throws: StoreError.clientKeyDoesNotOpen(keyID: first.keyID)) { try await other.clientKeys() }
    }
}
