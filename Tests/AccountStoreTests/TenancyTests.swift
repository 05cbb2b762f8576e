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
    private static func database(roles names: [String]) async throws
        -> (name: String, rolePassword: [String: String], settings: (String, String) throws -> PostgresStoreSettings) {
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
        return (name, passwords, settings)
    }

    private static func open(_ settings: PostgresStoreSettings, key: SymmetricKey) async throws -> PostgresAccountStore {
        try await PostgresAccountStore(settings: settings, key: key, hostName: "host", logger: Fixtures.logger)
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
        let password = try SharedStoreHosts.createTenantRole(role, in: name, on: server)
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

    private static func rewrite(_ opened: OpenedStore, _ sql: String) async throws {
        if opened.directory != nil {
            let raw = try DatabaseQueue(path: opened.store.location)
            try await raw.write { try $0.execute(sql: sql) }
            try raw.close()
        } else {
            _ = try await SharedTestDatabase.server.psql(sql, database: SharedTestDatabase.database)
        }
    }

    @Test("a store from before the seal: the first host of each tenant seals that tenant's rows with its own key")
    func sealsExistingRows() async throws {
        let keyA = SymmetricKey(size: .bits256)
        let keyB = SymmetricKey(size: .bits256)
        let (tenantA, tenantB) = (SharedTestDatabase.freshTenant(), SharedTestDatabase.freshTenant())
        let a = try await SharedTestDatabase.openStore(tenant: tenantA, key: keyA)
        let b = try await SharedTestDatabase.openStore(tenant: tenantB, key: keyB)
        let (recordA, recordB) = (Fixtures.record(), Fixtures.record())
        try await a.insert(recordA, secrets: Fixtures.secrets())
        try await b.insert(recordB, secrets: Fixtures.secrets())
        await a.close()
        await b.close()
        // As a store written before the seal came in looks: no seals, no tenant sealed yet.
        _ = try await SharedTestDatabase.server.psql("""
            UPDATE account SET metadata_seal = NULL WHERE tenant IN ('\(tenantA)', '\(tenantB)');
            DELETE FROM blueskyd_tenant_sealed WHERE tenant IN ('\(tenantA)', '\(tenantB)');
            """, database: SharedTestDatabase.database)

        // Tenant A's host comes first: it seals A's rows only, with A's key.
        let reopenedA = try await SharedTestDatabase.openStore(tenant: tenantA, key: keyA)
        #expect(try await reopenedA.account(id: recordA.id) == recordA)
        let reopenedB = try await SharedTestDatabase.openStore(tenant: tenantB, key: keyB)
        #expect(try await reopenedB.account(id: recordB.id) == recordB, "B's rows were left for B's key")
        await reopenedA.close()
        await reopenedB.close()
        // From now on a row without a seal is an altered one; a wrong key never seals.
        _ = try await SharedTestDatabase.server.psql("UPDATE account SET metadata_seal = NULL WHERE id = '\(recordA.id)'",
                                               database: SharedTestDatabase.database)
        let again = try await SharedTestDatabase.openStore(tenant: tenantA, key: keyA)
        #expect(try await again.account(id: recordA.id)?.isAltered == true)
        await again.close()
    }

    @Test("a SQLite store from before the seal: its migration seals the rows, unless the key is wrong (then the start fails)")
    func sqliteMigrationSeals() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let key = SymmetricKey(size: .bits256)
        let store = try Fixtures.openStore(in: directory.url, key: key)
        let record = Fixtures.record()
        try await store.insert(record, secrets: Fixtures.secrets())
        let path = store.databasePath
        await store.close()
        // As the file looked before the v7 migration.
        let raw = try DatabaseQueue(path: path)
        try await raw.write { db in
            try db.execute(sql: "ALTER TABLE account DROP COLUMN metadata_seal")
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v7-metadata-seal'")
        }
        try raw.close()

        #expect(throws: StoreError.secretDoesNotOpen(account: record.id)) {
            try Fixtures.openStore(in: directory.url, key: SymmetricKey(size: .bits256))
        }
        let reopened = try Fixtures.openStore(in: directory.url, key: key)
        #expect(try await reopened.account(id: record.id) == record)
        await reopened.close()
    }

    @Test("a host with the wrong key meeting unsealed rows does not seal them: its start fails")
    func wrongKeyDoesNotSeal() async throws {
        let tenant = SharedTestDatabase.freshTenant()
        let key = SymmetricKey(size: .bits256)
        let store = try await SharedTestDatabase.openStore(tenant: tenant, key: key)
        let record = Fixtures.record()
        try await store.insert(record, secrets: Fixtures.secrets())
        await store.close()
        _ = try await SharedTestDatabase.server.psql("""
            UPDATE account SET metadata_seal = NULL WHERE tenant = '\(tenant)';
            DELETE FROM blueskyd_tenant_sealed WHERE tenant = '\(tenant)';
            """, database: SharedTestDatabase.database)
        await #expect(throws: StoreError.secretDoesNotOpen(account: record.id)) {
            try await SharedTestDatabase.openStore(tenant: tenant, key: SymmetricKey(size: .bits256))
        }
        let right = try await SharedTestDatabase.openStore(tenant: tenant, key: key)
        #expect(try await right.account(id: record.id) == record)
        await right.close()
    }
}
