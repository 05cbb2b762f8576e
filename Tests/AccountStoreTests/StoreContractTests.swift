import AccountStoreCore
import Crypto
import Foundation
import Testing

/// What every `AccountStore` promises, run against SQLite and PostgreSQL alike.
@Suite("The account store's contract, on SQLite and on PostgreSQL")
struct StoreContractTests {
    @Test("a registered account reads back field for field, by id, by DID and in a page (as a start loads it), with its secrets",
          arguments: StoreBackend.allCases)
    func roundTrip(_ backend: StoreBackend) async throws {
        try await backend.withStore { store in
            let now = Date(timeIntervalSinceReferenceDate: 810_000_000.123456)
            var record = Fixtures.record(createdAt: now)
            record.oauth = OAuthSessionInfo(issuer: "https://auth.example.test", tokenEndpoint: "https://auth.example.test/token",
                                            revocationEndpoint: nil, scope: "atproto transition:generic", sessionStartedAt: now,
                                            clientKind: .loopback, clientID: "http://localhost", clientKeyID: nil)
            record.authKind = .oauth
            record.accessExpiresAt = now.addingTimeInterval(3600)
            record.profile = AccountProfile(displayName: "Ünïcode ✓", avatar: nil, description: "about", fetchedAt: now)
            let secrets = AccountSecrets(accessToken: "access-1", refreshToken: "refresh-1", dpopPrivateKey: Data([1, 2, 3]))
            try await store.insert(record, secrets: secrets)
            #expect(try await store.account(id: record.id) == record)
            #expect(try await store.account(did: record.did) == record)
            #expect(try await store.accounts(after: nil, limit: 10) == [record])
            #expect(try await store.secrets(for: record.id) == secrets)
            #expect(try await store.count() == 1)
            #expect(try await store.account(id: UUID()) == nil)
            await #expect(throws: StoreError.self) { try await store.secrets(for: UUID()) }
        }
    }

    @Test("an OAuth 2.0 server's account (issuer#subject, no refresh token) reads back with its sealed client facts",
          arguments: StoreBackend.allCases)
    func oauth2RoundTrip(_ backend: StoreBackend) async throws {
        try await backend.withStore { store in
            let now = Date(timeIntervalSinceReferenceDate: 810_000_000.5)
            let info = OAuthSessionInfo(issuer: "https://social.example.test", tokenEndpoint: "https://social.example.test/oauth/token",
                                        revocationEndpoint: "https://social.example.test/oauth/revoke", scope: "read write",
                                        sessionStartedAt: now, clientKind: .oauth2AccessOnly, clientID: "app-1")
            let record = AccountRecord(did: "https://social.example.test#109", handle: "alice@social.example.test", handleVerified: true,
                                       pds: "https://social.example.test", authKind: .oauth2, createdAt: now, lastRefreshAt: now,
                                       accessExpiresAt: now.addingTimeInterval(86_400), refreshExpiresAt: now.addingTimeInterval(86_400),
                                       oauth: info)
            let facts = OAuth2SessionFacts(clientSecret: "app-secret", redirectURI: "http://127.0.0.1:41234/callback",
                                           profileURL: "https://social.example.test/api/v1/accounts/verify_credentials",
                                           profileFields: ["subject": "id", "handle": "acct"], provider: nil)
            let secrets = AccountSecrets(accessToken: "access-1", refreshToken: "", oauth2: facts)
            try await store.insert(record, secrets: secrets)
            #expect(try await store.account(did: record.did) == record)
            #expect(try await store.accounts(after: nil, limit: 10) == [record])
            #expect(try await store.secrets(for: record.id) == secrets)
            #expect(try await store.account(id: record.id)?.sessionEndsAt == record.accessExpiresAt)
            #expect(!"\(secrets)".contains("app-secret") && !"\(facts)".contains("app-secret"), "no secret in a description")
        }
    }

    @Test("a DID registers once; a batch with a repeated DID inserts nothing", arguments: StoreBackend.allCases)
    func uniqueDIDs(_ backend: StoreBackend) async throws {
        try await backend.withStore { store in
            let first = Fixtures.record(did: "did:plc:same")
            try await store.insert(first, secrets: Fixtures.secrets())
            await #expect(throws: StoreError.duplicateDID(existing: first.id)) {
                try await store.insert(Fixtures.record(did: "did:plc:same"), secrets: Fixtures.secrets())
            }
            let batch = [(Fixtures.record(), Fixtures.secrets()), (Fixtures.record(did: "did:plc:same"), Fixtures.secrets())]
            await #expect(throws: StoreError.self) { try await store.insert(contentsOf: batch.map { (record: $0.0, secrets: $0.1) }) }
            #expect(try await store.count() == 1)
        }
    }

    @Test("metadata updates, oldest first listing, and removal", arguments: StoreBackend.allCases)
    func updatesAndListing(_ backend: StoreBackend) async throws {
        try await backend.withStore { store in
            let base = Date(timeIntervalSinceReferenceDate: 800_000_000)
            let records = (0..<5).map { Fixtures.record(createdAt: base.addingTimeInterval(Double(4 - $0))) }
            try await store.insert(contentsOf: records.map { (record: $0, secrets: Fixtures.secrets()) })
            #expect(try await store.allAccounts().map(\.id) == records.reversed().map(\.id))
            var seen: [UUID] = []
            try await store.forEachAccount { seen.append($0.id) }
            #expect(seen == records.reversed().map(\.id))

            // An identity save from a stale record: the handle and PDS are written, the state,
            // expiry and profile another write stored meanwhile are not rolled back.
            var stale = records[0]
            try await store.markState(id: stale.id, state: .needsLogin, reason: "refused", at: base)
            try await store.setProfile(id: stale.id, AccountProfile(displayName: "Newer", avatar: nil, description: nil, fetchedAt: base))
            stale.handle = "new.example.test"
            stale.handleVerified = false
            stale.pds = "https://moved.example.test"
            stale.accessExpiresAt = base.addingTimeInterval(-1)
            try await store.saveIdentity(stale)
            let saved = try #require(try await store.account(id: stale.id))
            #expect(saved.handle == "new.example.test" && !saved.handleVerified && saved.pds == "https://moved.example.test")
            #expect(saved.state == .needsLogin && saved.stateReason == "refused" && saved.profile?.displayName == "Newer")
            #expect(saved.accessExpiresAt == records[0].accessExpiresAt)
            let unknown = Fixtures.record()
            await #expect(throws: StoreError.unknownAccount(unknown.id)) { try await store.saveIdentity(unknown) }
            #expect(try await store.delete(id: records[1].id).id == records[1].id)
            await #expect(throws: StoreError.unknownAccount(records[1].id)) { try await store.delete(id: records[1].id) }
            #expect(try await store.count() == 4)
        }
    }

    @Test("one default at most; removing it leaves none", arguments: StoreBackend.allCases)
    func defaultAccount(_ backend: StoreBackend) async throws {
        try await backend.withStore { store in
            let (a, b) = (Fixtures.record(isDefault: true), Fixtures.record())
            try await store.insert(a, secrets: Fixtures.secrets())
            try await store.insert(b, secrets: Fixtures.secrets())
            try await store.setDefault(id: b.id)
            #expect(try await store.allAccounts().filter(\.isDefault).map(\.id) == [b.id])
            let unknown = UUID()
            await #expect(throws: StoreError.unknownAccount(unknown)) { try await store.setDefault(id: unknown) }
            try await store.delete(id: b.id)
            #expect(try await store.allAccounts().filter(\.isDefault).isEmpty)
            try await store.setDefault(id: a.id)
            try await store.clearDefault()
            #expect(try await store.allAccounts().filter(\.isDefault).isEmpty)
        }
    }

    @Test("a new login replaces the session in place: same id and default, the next version, no old nonces",
          arguments: StoreBackend.allCases)
    func replaceSession(_ backend: StoreBackend) async throws {
        try await backend.withStore { store in
            let record = Fixtures.record(isDefault: true)
            try await store.insert(record, secrets: Fixtures.secrets())
            try await store.saveDPoPNonces([StoredDPoPNonce(account: record.id, origin: "https://pds.example.test", nonce: "n1",
                                                      receivedAt: Date())])
            #expect(try await store.allDPoPNonces().count == 1)
            var again = record
            again.handle = "again.example.test"
            let secrets = Fixtures.secrets()
            #expect(try await store.replaceSession(again, secrets: secrets) == 2)
            let stored = try #require(try await store.account(id: record.id))
            #expect(stored.handle == "again.example.test" && stored.isDefault && stored.secretsVersion == 2)
            #expect(try await store.secrets(for: record.id) == secrets)
            #expect(try await store.allDPoPNonces().isEmpty)
            try await store.setProfile(id: record.id, AccountProfile(displayName: "Name", avatar: "https://a/b", description: nil,
                                                               fetchedAt: Date(timeIntervalSinceReferenceDate: 1)))
            #expect(try await store.account(id: record.id)?.profile?.displayName == "Name")
        }
    }

    @Test("DPoP nonces: one per account and origin, the newest of a batch kept; other tenants' accounts ignored",
          arguments: StoreBackend.allCases)
    func nonces(_ backend: StoreBackend) async throws {
        try await backend.withStore { store in
            let (a, b) = (Fixtures.record(), Fixtures.record())
            try await store.insert(a, secrets: Fixtures.secrets())
            try await store.insert(b, secrets: Fixtures.secrets())
            let base = Date(timeIntervalSinceReferenceDate: 800_000_000)
            try await store.saveDPoPNonces([
                StoredDPoPNonce(account: b.id, origin: "https://pds.example.test", nonce: "b1", receivedAt: base),
                StoredDPoPNonce(account: a.id, origin: "https://pds.example.test", nonce: "a2", receivedAt: base.addingTimeInterval(2)),
                StoredDPoPNonce(account: a.id, origin: "https://pds.example.test", nonce: "a1", receivedAt: base.addingTimeInterval(1)),
                StoredDPoPNonce(account: a.id, origin: "https://auth.example.test", nonce: "a3", receivedAt: base),
                StoredDPoPNonce(account: UUID(), origin: "https://pds.example.test", nonce: "nobody", receivedAt: base),
            ])
            let stored = try await store.allDPoPNonces()
            #expect(Set(stored.map(\.nonce)) == ["b1", "a2", "a3"])
        }
    }

    @Test("client signing keys: sealed, listed oldest first, removed only when unused", arguments: StoreBackend.allCases)
    func clientKeys(_ backend: StoreBackend) async throws {
        try await backend.withStore { store in
            let key = StoredClientKey(keyID: "k1", privateKey: Data(repeating: 7, count: 32),
                                      createdAt: Date(timeIntervalSinceReferenceDate: 5))
            try await store.addClientKey(key)
            #expect(try await store.clientKeys() == [key])
            var record = Fixtures.record()
            record.authKind = .oauth
            record.oauth = OAuthSessionInfo(issuer: "https://auth.example.test", tokenEndpoint: "https://auth.example.test/t",
                                            revocationEndpoint: nil, scope: "atproto", sessionStartedAt: Date(),
                                            clientKind: .confidential, clientID: "https://c.example.test/m.json", clientKeyID: "k1")
            try await store.insert(record, secrets: Fixtures.secrets())
            #expect(try await store.clientKeyIDsInUse() == ["k1"])
            #expect(try await store.removeClientKey("k1") == false)
            try await store.delete(id: record.id)
            #expect(try await store.removeClientKey("k1") == true)
            #expect(try await store.clientKeys().isEmpty)
        }
    }
}
