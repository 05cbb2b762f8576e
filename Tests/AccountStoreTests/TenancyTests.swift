import AccountStoreCore
import BlueskyTesting
import Crypto
import DaemonHarness
import Foundation
import GRDB
import PostgresStore
import Testing

/// What keeps tenants apart and accounts where they were put: row-level security for a
/// tenant's own role, and the metadata seal against rows rewritten without the store key.
@Suite("Tenants the database keeps apart, and rows rewritten behind blueskyd's back", .timeLimit(.minutes(2)))
struct TenancyTests {
    /// A database of its own (roles are the server's, so each test names its own), migrated by
    /// its owner, with tenant roles `names` set up as README says.
    static func database(roles names: [String]) async throws
        -> (name: String, ownerPassword: String, rolePassword: [String: String],
            settings: (String, String) throws -> PostgresStoreSettings) {
        let server = try await SharedTestDatabase.server
        let name = "d" + UUID().uuidString.prefix(8).lowercased()
        let (ownerURL, ownerPassword) = try SharedStoreHosts.createDatabase(name, on: server)
        // The owner migrates (a tenant's role may not change the schema).
        let owner = try await PostgresAccountStore(
            settings: PostgresStoreSettings(url: ownerURL, password: ownerPassword, tenant: name, leaseDuration: 60),
            key: SymmetricKey(size: .bits256), hostName: "owner", logger: Fixtures.logger)
        await owner.close()
        var passwords: [String: String] = [:]
        for role in names { passwords[role] = try SharedStoreHosts.createTenantRole(role, in: name, on: server) }
        let settings = { (role: String, tenant: String) throws -> PostgresStoreSettings in
            try PostgresStoreSettings(url: server.url(user: role, database: name) + "?sslmode=disable",
                                      password: passwords[role], tenant: tenant, leaseDuration: 60)
        }
        return (name, ownerPassword, passwords, settings)
    }

    static func open(_ settings: PostgresStoreSettings, key: SymmetricKey) async throws -> PostgresAccountStore {
        try await PostgresAccountStore(settings: settings, key: key, hostName: "host", logger: Fixtures.logger)
    }

    /// A host of database `name` connecting as its owner (the role of the same name), for
    /// `tenant` (the owner's own by default).
    static func ownerSettings(_ name: String, password: String, tenant: String? = nil) async throws -> PostgresStoreSettings {
        let server = try await SharedTestDatabase.server
        return try PostgresStoreSettings(url: server.url(user: name, database: name) + "?sslmode=disable", password: password,
                                         tenant: tenant ?? name)
    }

    @Test("a tenant's own role reads and writes its rows only, whatever SQL it sends")
    func roleSeesItsRowsOnly() async throws {
        let suffix = UUID().uuidString.prefix(6).lowercased()
        let (alice, bob) = ("alice_\(suffix)", "bob_\(suffix)")
        let db = try await Self.database(roles: [alice, bob])
        let key = SymmetricKey(size: .bits256)
        let aliceStore = try await Self.open(db.settings(alice, alice), key: key)
        let bobStore = try await Self.open(db.settings(bob, bob), key: key)
        let record = Fixtures.record()
        try await aliceStore.insert(record, secrets: Fixtures.secrets())
        try await aliceStore.saveDPoPNonces([StoredDPoPNonce(account: record.id, origin: "https://pds.test", nonce: "n1",
                                                             receivedAt: Date())])
        try await bobStore.insert(Fixtures.record(), secrets: Fixtures.secrets())
        await aliceStore.close()
        await bobStore.close()

        // Bob's role, in plain SQL: none of Alice's rows can be read, changed or made.
        let server = try await SharedTestDatabase.server
        func asBob(_ sql: String) throws -> String { try server.psql(sql, database: db.name, user: bob) }
        #expect(try asBob("SELECT count(*) FROM account") == "1")
        #expect(try asBob("SELECT count(*) FROM account WHERE tenant = '\(alice)'") == "0")
        #expect(try asBob("SELECT count(*) FROM dpop_nonce") == "0")
        #expect(try asBob("SELECT count(*) FROM blueskyd_host WHERE tenant = '\(alice)'") == "0")
        #expect(try asBob("UPDATE account SET pds = 'https://evil.test' WHERE id = '\(record.id)' RETURNING id") == "")
        #expect(try asBob("DELETE FROM account WHERE tenant = '\(alice)' RETURNING id") == "")
        #expect(throws: PostgresServer.Failure.self) {
            try asBob("UPDATE account SET tenant = '\(alice)' WHERE tenant = '\(bob)'")
        }
        #expect(throws: PostgresServer.Failure.self) {
            try asBob("INSERT INTO blueskyd_clock (tenant, last_beat) VALUES ('\(alice)', 0)")
        }
        #expect(try server.psql("SELECT pds FROM account WHERE id = '\(record.id)'", database: db.name) == "https://pds.example.test")
    }

    @Test("a role named otherwise than its tenant is refused at start, told which tenant it is held to")
    func roleAndTenantDiffer() async throws {
        let role = "carol_\(UUID().uuidString.prefix(6).lowercased())"
        let db = try await Self.database(roles: [role])
        let error = await #expect(throws: StoreError.self) {
            try await Self.open(db.settings(role, "someone-else"), key: SymmetricKey(size: .bits256))
        }
        #expect(error?.description.contains("set tenant = \"\(role)\"") == true, "\(String(describing: error))")
    }

    @Test("a tenant's role cannot bring the schema up to date: told to start once as the tables' owner")
    func roleCannotMigrate() async throws {
        let server = try await SharedTestDatabase.server
        let name = "d" + UUID().uuidString.prefix(8).lowercased()
        _ = try SharedStoreHosts.createDatabase(name, on: server)
        let role = "dave_\(UUID().uuidString.prefix(6).lowercased())"
        // Made before the schema exists, so granted the schema alone (README grants the tables
        // once the owner created them).
        let password = PostgresServer.randomPassword()
        try server.psql("CREATE ROLE \(role) LOGIN PASSWORD '\(password)'; GRANT USAGE ON SCHEMA public TO \(role)", database: name)
        let settings = try PostgresStoreSettings(url: server.url(user: role, database: name) + "?sslmode=disable",
                                                 password: password, tenant: role, leaseDuration: 60)
        let error = await #expect(throws: StoreError.self) { try await Self.open(settings, key: SymmetricKey(size: .bits256)) }
        #expect(error?.description.contains("may not change the schema: start blueskyd once with the role that owns") == true,
                "\(String(describing: error))")
    }

    @Test("a row whose PDS was rewritten without the key reads as altered; its secrets are refused; others are untouched",
          arguments: [StoreBackend.sqlite, .postgresql])
    func rewrittenRow(backend: StoreBackend) async throws {
        let opened = try await backend.open()
        let store = opened.store
        let victim = Fixtures.record()
        let bystander = Fixtures.record()
        try await store.insert(victim, secrets: Fixtures.secrets())
        try await store.insert(bystander, secrets: Fixtures.secrets())
        let sql = "UPDATE account SET pds = 'https://pds.attacker.test' WHERE did = '\(victim.did)'"
        try await Self.rewrite(opened, sql)

        let read = try #require(try await store.account(id: victim.id))
        #expect(read.isAltered && read.state == .needsLogin && read.stateReason == StoreError.recordAlteredReason)
        await #expect(throws: StoreError.recordAltered(account: victim.id)) { try await store.secrets(for: victim.id) }
        #expect(try await store.account(id: bystander.id) == bystander)
        await #expect(throws: Never.self) { try await store.secrets(for: bystander.id) }
        // A new login seals the row again.
        _ = try await store.replaceSession(victim, secrets: Fixtures.secrets())
        #expect(try await store.account(id: victim.id)?.isAltered == false)
        await opened.close()
    }

    @Test("""
        an identity saved from a record older than a login stored meanwhile: the login's auth kind and endpoints stay, \
        the row stays sealed; a row already altered is not sealed again
        """, arguments: [StoreBackend.sqlite, .postgresql])
    func staleIdentityKeepsTheSeal(backend: StoreBackend) async throws {
        let opened = try await backend.open()
        let store = opened.store
        let record = Fixtures.record()
        try await store.insert(record, secrets: Fixtures.secrets())
        var upgraded = record
        upgraded.authKind = .oauth
        upgraded.oauth = OAuthSessionInfo(issuer: "https://auth.example.test", tokenEndpoint: "https://auth.example.test/oauth/token",
                                          revocationEndpoint: nil, scope: "atproto", sessionStartedAt: Date(), clientKind: .loopback,
                                          clientID: "http://localhost")
        _ = try await store.replaceSession(upgraded, secrets: Fixtures.secrets())
        var stale = record
        stale.handle = "renamed.example.test"
        stale.pds = "https://moved.example.test"
        try await store.saveIdentity(stale)
        let read = try #require(try await store.account(id: record.id))
        #expect(!read.isAltered && read.authKind == .oauth && read.oauth?.issuer == "https://auth.example.test")
        #expect(read.handle == "renamed.example.test" && read.pds == "https://moved.example.test")

        try await Self.rewrite(opened, "UPDATE account SET pds = 'https://pds.attacker.test' WHERE did = '\(record.did)'")
        await #expect(throws: StoreError.recordAltered(account: record.id)) { try await store.saveIdentity(stale) }
        #expect(try await store.account(id: record.id)?.isAltered == true)
        await opened.close()
    }

    static func rewrite(_ opened: OpenedStore, _ sql: String) async throws {
        if opened.directory != nil {
            let raw = try DatabaseQueue(path: opened.store.location)
            try await raw.write { try $0.execute(sql: sql) }
            try raw.close()
        } else {
            _ = try await SharedTestDatabase.server.run(sql)
        }
    }

    /// Turns `record`'s row into one written before blueskyd sealed rows: secrets in the first
    /// format (which says nothing of a seal) and no metadata seal.
    private static func makeLegacy(_ opened: OpenedStore, _ record: AccountRecord, key: SymmetricKey) async throws {
        let sealer = SecretSealer(key: key)
        var blob = try #require(sealer.seal(bytes: try JSONEncoder().encode(Fixtures.secrets()),
                                            additionalData: SecretSealer.additionalData(for: record.id, label: SecretSealer.legacyPurposeLabel)))
        blob[blob.startIndex] = SecretSealer.legacyFormatVersion
        let hex = blob.map { String(format: "%02x", $0) }.joined()
        let literal = opened.directory != nil ? "X'\(hex)'" : "'\\x\(hex)'::bytea"
        try await Self.rewrite(opened, """
            UPDATE account SET sealed_secrets = \(literal), metadata_seal = NULL WHERE did = '\(record.did)'
            """)
    }

    @Test("""
        no start seals a row: rows from before the seal read as altered, whatever marker or migration record is gone, \
        until the operator seals them (store reseal), which seals only rows never sealed whose secrets open
        """, arguments: [StoreBackend.sqlite, .postgresql])
    func noStartSeals(backend: StoreBackend) async throws {
        let key = SymmetricKey(size: .bits256)
        let opened = try await backend.open(key: key)
        let (legacy, removed, intact) = (Fixtures.record(), Fixtures.record(), Fixtures.record())
        for record in [legacy, removed, intact] { try await opened.store.insert(record, secrets: Fixtures.secrets()) }
        try await Self.makeLegacy(opened, legacy, key: key)
        // The attack: a row that was sealed, pointed elsewhere, its seal cleared, any marker gone.
        try await Self.rewrite(opened, """
            UPDATE account SET pds = 'https://pds.attacker.test', metadata_seal = NULL WHERE did = '\(removed.did)'
            """)
        if opened.directory == nil {
            _ = try await SharedTestDatabase.server.run("DELETE FROM blueskyd_tenant_sealed")
        } else {
            try await Self.rewrite(opened, "DELETE FROM grdb_migrations WHERE identifier = 'v7-metadata-seal'")
        }
        await opened.store.close()
        if opened.directory != nil {
            // The migration runs again (its record is gone): with the column there, as a no-op
            // would; an old v7 would have sealed every row here.
            let raw = try DatabaseQueue(path: opened.store.location)
            try await raw.write { try $0.execute(sql: "ALTER TABLE account DROP COLUMN metadata_seal") }
            try raw.close()
        }
        let reopened = try await backend.open(key: key, reuse: opened)
        let store = reopened.store
        #expect(try await store.account(id: legacy.id)?.isAltered == true, "no start seals a row")
        #expect(try await store.account(id: removed.id)?.isAltered == true)
        await #expect(throws: StoreError.recordAltered(account: removed.id)) { try await store.secrets(for: removed.id) }
        if backend == .postgresql {
            #expect(try await store.account(id: intact.id) == intact)
        }

        let unsealed = try await store.unsealedAccounts()
        let findings = Dictionary(uniqueKeysWithValues: unsealed.map { ($0.record.id, $0.finding) })
        #expect(findings[legacy.id] == .neverSealed)
        #expect(findings[removed.id] == .sealRemoved, "the secrets say it had a seal")
        #expect(unsealed.first { $0.record.id == removed.id }?.record.pds == "https://pds.attacker.test", "shown as stored")
        // The operator seals what may be sealed; a removed seal stays removed.
        #expect(try await store.sealAccounts([legacy.id, removed.id], at: Date()) == [legacy.id])
        let resealed = try #require(try await store.account(id: legacy.id))
        #expect(!resealed.isAltered)
        #expect(try await store.account(id: removed.id)?.isAltered == true)
        await #expect(throws: Never.self) { try await store.secrets(for: legacy.id) }
        await reopened.close()
    }

    @Test("a store opened with another key seals nothing: every row's secrets do not open", arguments: [StoreBackend.sqlite, .postgresql])
    func wrongKeySealsNothing(backend: StoreBackend) async throws {
        let key = SymmetricKey(size: .bits256)
        let opened = try await backend.open(key: key)
        let record = Fixtures.record()
        try await opened.store.insert(record, secrets: Fixtures.secrets())
        try await Self.makeLegacy(opened, record, key: key)
        await opened.store.close()
        let wrong = try await backend.open(key: SymmetricKey(size: .bits256), reuse: opened)
        #expect(try await wrong.store.unsealedAccounts().map(\.finding) == [.secretsDoNotOpen])
        #expect(try await wrong.store.sealAccounts([record.id], at: Date()).isEmpty)
        await wrong.store.close()
        let right = try await backend.open(key: key, reuse: opened)
        #expect(try await right.store.unsealedAccounts().map(\.finding) == [.neverSealed])
        await right.close()
    }
}
