import AccountStoreCore
import BlueskyTesting
import Crypto
import DaemonHarness
import Foundation
import PostgresStore
import Synchronization
import Testing

/// Tenants share a database, and nothing in it but rows kept apart: the owner is held to its
/// own tenant like any role, no tenant writes the schema's record or can hold a lock another
/// tenant's start or default change waits for.
@Suite("Tenants share no more than the database", .timeLimit(.minutes(2)))
struct TenantIsolationTests {
    @Test("row-level security is forced on every blueskyd table: the tables' owner too is held to the tenant of its name")
    func forced() async throws {
        let db = try await TenancyTests.database(roles: [])
        let (server, name) = (try await SharedTestDatabase.server, db.name)
        let unforced = try await offThePool {
            try server.psql("""
                SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class
                WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace AND relname <> 'blueskyd_migration'
                    AND NOT (relrowsecurity AND relforcerowsecurity)
                """, database: name)
        }
        #expect(unforced == "", "tables without forced row-level security: \(unforced)")
        // The owner, named for another tenant, is refused: it would see none of that tenant's rows.
        let settings = try await TenancyTests.ownerSettings(name, password: db.ownerPassword, tenant: "alice")
        let error = await #expect(throws: StoreError.self) {
            try await TenancyTests.open(settings, key: SymmetricKey(size: .bits256))
        }
        #expect(error?.description.contains("set tenant = \"\(db.name)\"") == true, "\(String(describing: error))")
    }

    @Test("a tenant's role reads the migration record and the seal markers, and writes neither")
    func sharedTablesReadOnly() async throws {
        let bob = "bob_\(UUID().uuidString.prefix(6).lowercased())"
        let db = try await TenancyTests.database(roles: [bob])
        let (server, name) = (try await SharedTestDatabase.server, db.name)
        let asBob = { (sql: String) async throws -> String in
            try await offThePool { try server.psql(sql, database: name, user: bob) }
        }
        #expect(try await asBob("SELECT count(*) > 0 FROM blueskyd_migration") == "t")
        for sql in ["INSERT INTO blueskyd_migration (name) VALUES ('v99-forged')", "DELETE FROM blueskyd_migration",
                    "TRUNCATE blueskyd_migration", "INSERT INTO blueskyd_tenant_sealed VALUES ('\(bob)', 0)",
                    "LOCK TABLE blueskyd_migration IN EXCLUSIVE MODE", "CREATE TABLE blueskyd_tenant_later (x int)"] {
            await #expect(throws: PostgresServer.Failure.self, "\(sql)") { _ = try await asBob(sql) }
        }
    }

    @Test("""
        a tenant holding every lock it can take (the old schema and default advisory locks, a read of the migration \
        record, its own turn row) delays neither another tenant's start nor its default change, nor the owner's start
        """)
    func noSharedLocks() async throws {
        let suffix = UUID().uuidString.prefix(6).lowercased()
        let (alice, bob) = ("alice_\(suffix)", "bob_\(suffix)")
        let db = try await TenancyTests.database(roles: [alice, bob])
        let (server, name) = (try await SharedTestDatabase.server, db.name)
        // Bob's session holds its locks for 30 s.
        let holding = Task {
            try await offThePool {
                try server.psql("""
                    BEGIN;
                    SELECT pg_advisory_lock(hashtext('blueskyd schema'));
                    SELECT pg_advisory_lock(hashtextextended('blueskyd default account of \(alice)', 0));
                    SELECT count(*) FROM blueskyd_migration;
                    INSERT INTO blueskyd_tenant_lock (tenant) VALUES ('\(bob)');
                    SELECT tenant FROM blueskyd_tenant_lock FOR UPDATE;
                    SELECT pg_sleep(30);
                    COMMIT;
                    """, database: name, user: bob)
            }
        }
        // Bob's locks are in place once his turn row is there (as the owner sees it).
        let held = try await eventually(timeout: .seconds(20)) {
            try await offThePool {
                try server.psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted", database: name) == "2"
            }
        }
        #expect(held)
        let clock = ContinuousClock()
        let started = clock.now
        let key = SymmetricKey(size: .bits256)
        let store = try await TenancyTests.open(db.settings(alice, alice), key: key)
        let (a, b) = (Fixtures.record(isDefault: true), Fixtures.record())
        try await store.insert(a, secrets: Fixtures.secrets())
        try await store.insert(b, secrets: Fixtures.secrets())
        try await store.setDefault(id: b.id, at: Date())
        #expect(try await store.account(id: b.id)?.isDefault == true)
        await store.close()
        let owner = try await TenancyTests.open(try await TenancyTests.ownerSettings(name, password: db.ownerPassword), key: key)
        await owner.close()
        let took = clock.now - started
        #expect(took < .seconds(20), "took \(took) while bob held his locks")
        holding.cancel()
        _ = try? await offThePool {
            try server.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '\(bob)'", database: name)
        }
    }

    @Test("""
        a role that bypasses row-level security, or a tenant's role that may write the migration record or create \
        tables, is refused at start, told what to change
        """)
    func unsafeRolesRefused() async throws {
        let suffix = UUID().uuidString.prefix(6).lowercased()
        let (dave, erin) = ("dave_\(suffix)", "erin_\(suffix)")
        let db = try await TenancyTests.database(roles: [dave, erin])
        let (server, name) = (try await SharedTestDatabase.server, db.name)
        _ = try await offThePool {
            try server.psql("""
                ALTER ROLE \(dave) BYPASSRLS;
                GRANT INSERT ON blueskyd_migration TO \(erin);
                """, database: name)
        }
        let bypassing = await #expect(throws: StoreError.self) {
            try await TenancyTests.open(db.settings(dave, dave), key: SymmetricKey(size: .bits256))
        }
        #expect(bypassing?.description.contains("bypasses row-level security") == true, "\(String(describing: bypassing))")
        let writing = await #expect(throws: StoreError.self) {
            try await TenancyTests.open(db.settings(erin, erin), key: SymmetricKey(size: .bits256))
        }
        #expect(writing?.description.contains("REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON blueskyd_migration") == true,
                "\(String(describing: writing))")
    }
}

/// What a blind attack from the docs found on the tenant boundary (helper report, 2026-11-28).
@Suite("Tenants: what the owner's rights and a loose grant could do", .timeLimit(.minutes(2)))
struct TenantLooseningTests {
    @Test("""
        row-level security switched off, or a policy loosened, by someone with the owner's rights: every host, the \
        owner's too, refuses to start, saying the schema was changed
        """)
    func loosenedSchemaRefused() async throws {
        let alice = "alice_\(UUID().uuidString.prefix(6).lowercased())"
        for change in ["ALTER TABLE account NO FORCE ROW LEVEL SECURITY",
                       "DROP POLICY blueskyd_tenant ON blueskyd_host; CREATE POLICY blueskyd_tenant ON blueskyd_host USING (true)",
                       "CREATE POLICY open_reads ON account FOR SELECT USING (true)"] {
            let db = try await TenancyTests.database(roles: [alice + "_\(change.count)"])
            let (server, name, role) = (try await SharedTestDatabase.server, db.name, alice + "_\(change.count)")
            _ = try await offThePool { try server.psql(change, database: name) }
            let error = await #expect(throws: StoreError.self, "\(change)") {
                try await TenancyTests.open(db.settings(role, role), key: SymmetricKey(size: .bits256))
            }
            #expect(error?.description.contains("is not as blueskyd made it") == true, "\(String(describing: error))")
            let ownerSettings = try await TenancyTests.ownerSettings(name, password: db.ownerPassword)
            let owner = await #expect(throws: StoreError.self, "\(change)") {
                try await TenancyTests.open(ownerSettings, key: SymmetricKey(size: .bits256))
            }
            #expect(owner != nil)
        }
    }

    @Test("""
        a tenant role that may update one column of the migration record, inherits the owner, may create roles, or may \
        act as another login role is refused at start
        """)
    func looseGrantsRefused() async throws {
        let suffix = UUID().uuidString.prefix(6).lowercased()
        let (a, b, c, d, other) = ("a_\(suffix)", "b_\(suffix)", "c_\(suffix)", "d_\(suffix)", "o_\(suffix)")
        let db = try await TenancyTests.database(roles: [a, b, c, d, other])
        let (server, name) = (try await SharedTestDatabase.server, db.name)
        _ = try await offThePool {
            try server.psql("""
                GRANT UPDATE (name) ON blueskyd_migration TO \(a);
                GRANT \(name) TO \(b);
                ALTER ROLE \(c) CREATEROLE;
                GRANT \(other) TO \(d);
                """, database: name)
        }
        for role in [a, b, c, d] {
            let error = await #expect(throws: StoreError.self, "\(role)") {
                try await TenancyTests.open(db.settings(role, role), key: SymmetricKey(size: .bits256))
            }
            #expect(error?.description.contains("may change what every tenant relies on") == true, "\(String(describing: error))")
        }
    }

    @Test("a schema named like the tenant's role, holding its own account table, does not capture the tenant's rows")
    func shadowSchemaIgnored() async throws {
        let alice = "alice_\(UUID().uuidString.prefix(6).lowercased())"
        let db = try await TenancyTests.database(roles: [alice])
        let (server, name) = (try await SharedTestDatabase.server, db.name)
        // As an administrator could (or any role with CREATE on the database): first in the
        // default search path ("$user", public).
        _ = try await offThePool {
            try server.psql("""
                CREATE SCHEMA \(alice);
                CREATE TABLE \(alice).account (LIKE public.account INCLUDING ALL);
                GRANT USAGE ON SCHEMA \(alice) TO \(alice);
                GRANT SELECT, INSERT, UPDATE, DELETE ON \(alice).account TO \(alice);
                """, database: name)
        }
        let store = try await TenancyTests.open(db.settings(alice, alice), key: SymmetricKey(size: .bits256))
        try await store.insert(Fixtures.record(), secrets: Fixtures.secrets())
        await store.close()
        let counts = try await offThePool {
            try server.psql("SELECT (SELECT count(*) FROM \(alice).account) || ' ' || (SELECT count(*) FROM public.account)",
                            database: name)
        }
        #expect(counts == "0 1", "the shadow table got nothing, the real one the account")
    }
}
