import AccountStoreCore
import Foundation
import PostgresNIO

extension PostgresAccountStore {
    /// The schema, as named migrations applied once each, in order. Never edit a shipped one;
    /// add another at the end. The columns are SQLite's (dates as seconds since 2001-01-01, so
    /// that both stores round-trip a `Date` exactly) plus the tenant.
    static let migrations: [Migration] = [
        Migration("v1-shared-store", """
            CREATE TABLE account (
                id uuid PRIMARY KEY,
                tenant text NOT NULL,
                did text NOT NULL,
                handle text,
                handle_verified boolean NOT NULL DEFAULT false,
                pds text NOT NULL,
                auth_kind text NOT NULL,
                state text NOT NULL,
                state_reason text,
                is_default boolean NOT NULL DEFAULT false,
                created_at double precision NOT NULL,
                updated_at double precision NOT NULL,
                last_refresh_at double precision,
                access_expires_at double precision,
                refresh_expires_at double precision,
                refresh_started_at double precision,
                oauth_issuer text,
                oauth_token_endpoint text,
                oauth_revocation_endpoint text,
                oauth_scope text,
                oauth_session_started_at double precision,
                oauth_client_kind text,
                oauth_client_id text,
                oauth_client_key_id text,
                profile_display_name text,
                profile_avatar text,
                profile_description text,
                profile_fetched_at double precision,
                secrets_version bigint NOT NULL DEFAULT 1,
                lease_owner text,
                lease_expires_at double precision,
                sealed_secrets bytea NOT NULL
            );
            CREATE UNIQUE INDEX account_tenant_did ON account (tenant, did);
            CREATE INDEX account_tenant_handle ON account (tenant, handle);
            CREATE INDEX account_tenant_created ON account (tenant, created_at, id);
            -- At most one default account per tenant, enforced by the server itself.
            CREATE UNIQUE INDEX account_single_default ON account (tenant) WHERE is_default;
            CREATE TABLE dpop_nonce (
                account_id uuid NOT NULL REFERENCES account (id) ON DELETE CASCADE,
                origin text NOT NULL,
                nonce text NOT NULL,
                received_at double precision NOT NULL,
                PRIMARY KEY (account_id, origin)
            );
            CREATE TABLE oauth_client_key (
                tenant text NOT NULL,
                key_id text NOT NULL,
                sealed_key bytea NOT NULL,
                created_at double precision NOT NULL,
                PRIMARY KEY (tenant, key_id)
            );
            """),
        // The shared refresh schedule. A migrated account is due 6 minutes before its access
        // token expires (the default lead at its widest; at once for opaque tokens): the host
        // that takes it then records when it is really due.
        Migration("v2-shared-schedule", """
            ALTER TABLE account ADD COLUMN refresh_due_at double precision;
            UPDATE account SET refresh_due_at = COALESCE(access_expires_at - 360, updated_at) WHERE state <> 'needs-login';
            CREATE INDEX account_tenant_refresh_due ON account (tenant, refresh_due_at)
            """),
        // The server each account refreshes at (an origin, as the daemon spells it), so that a
        // host takes from the shared schedule only accounts of servers it has room for.
        Migration("v3-refresh-server", "ALTER TABLE account ADD COLUMN refresh_server text NOT NULL DEFAULT ''",
                  backfill: backfillRefreshServers),
        // Which hosts are alive (each says so every few seconds), and when any host of a tenant
        // last did: a lease whose holder lives is never taken over, and time the database was
        // away from every host is not counted against any lease.
        Migration("v4-host-liveness", """
            CREATE TABLE blueskyd_host (
                tenant text NOT NULL,
                owner text NOT NULL,
                alive_until double precision NOT NULL,
                PRIMARY KEY (tenant, owner)
            );
            CREATE TABLE blueskyd_clock (
                tenant text PRIMARY KEY,
                last_beat double precision NOT NULL
            )
            """),
        // A MAC under the store key over what decides where an account's tokens go (its row's
        // tenant, id, auth kind, DID, PDS, issuer and endpoints): a row rewritten by anyone
        // without the key is found, and its tokens sent nowhere. Tenants may hold different
        // keys, so each tenant's first host seals that tenant's rows (`sealTenantRows`) and
        // records it here; from then on a row without a seal is an altered one.
        Migration("v5-metadata-seal", """
            ALTER TABLE account ADD COLUMN metadata_seal bytea;
            CREATE TABLE blueskyd_tenant_sealed (
                tenant text PRIMARY KEY,
                sealed_at double precision NOT NULL
            )
            """),
        // Row-level security: a tenant connecting as a role of its own name sees and writes its
        // own rows only (the tables' owner, which migrates them, is not held to it).
        Migration("v6-row-level-security", """
            ALTER TABLE account ENABLE ROW LEVEL SECURITY;
            CREATE POLICY blueskyd_tenant ON account USING (tenant = current_user) WITH CHECK (tenant = current_user);
            ALTER TABLE oauth_client_key ENABLE ROW LEVEL SECURITY;
            CREATE POLICY blueskyd_tenant ON oauth_client_key USING (tenant = current_user) WITH CHECK (tenant = current_user);
            ALTER TABLE dpop_nonce ENABLE ROW LEVEL SECURITY;
            CREATE POLICY blueskyd_tenant ON dpop_nonce USING (EXISTS (SELECT 1 FROM account a WHERE a.id = account_id));
            ALTER TABLE blueskyd_host ENABLE ROW LEVEL SECURITY;
            CREATE POLICY blueskyd_tenant ON blueskyd_host USING (tenant = current_user) WITH CHECK (tenant = current_user);
            ALTER TABLE blueskyd_clock ENABLE ROW LEVEL SECURITY;
            CREATE POLICY blueskyd_tenant ON blueskyd_clock USING (tenant = current_user) WITH CHECK (tenant = current_user);
            ALTER TABLE blueskyd_tenant_sealed ENABLE ROW LEVEL SECURITY;
            CREATE POLICY blueskyd_tenant ON blueskyd_tenant_sealed USING (tenant = current_user) WITH CHECK (tenant = current_user)
            """),
        // The leases held at any moment are a few among millions of rows: every beat looks for
        // its host's that ran out, and the first beat after an outage moves them all on.
        Migration("v7-lease-index", "CREATE INDEX account_lease ON account (tenant, lease_owner) WHERE lease_owner IS NOT NULL"),
        // Tenants share no more than rows: the owner is held to its own tenant's rows like any
        // role (FORCE); the migration record and the seal markers are the owner's to write; one
        // tenant's turn at changing its default is a row of its own, which another tenant can
        // neither see nor lock (an advisory lock any role could hold). Later migrations that
        // backfill over every tenant run between NO FORCE and FORCE in their own transaction.
        Migration("v8-tenancy", """
            ALTER TABLE account FORCE ROW LEVEL SECURITY;
            ALTER TABLE oauth_client_key FORCE ROW LEVEL SECURITY;
            ALTER TABLE dpop_nonce FORCE ROW LEVEL SECURITY;
            ALTER TABLE blueskyd_host FORCE ROW LEVEL SECURITY;
            ALTER TABLE blueskyd_clock FORCE ROW LEVEL SECURITY;
            ALTER TABLE blueskyd_tenant_sealed FORCE ROW LEVEL SECURITY;
            CREATE TABLE blueskyd_tenant_lock (tenant text PRIMARY KEY);
            ALTER TABLE blueskyd_tenant_lock ENABLE ROW LEVEL SECURITY;
            ALTER TABLE blueskyd_tenant_lock FORCE ROW LEVEL SECURITY;
            CREATE POLICY blueskyd_tenant ON blueskyd_tenant_lock USING (tenant = current_user) WITH CHECK (tenant = current_user);
            REVOKE ALL ON blueskyd_migration, blueskyd_tenant_sealed FROM PUBLIC
            """, backfill: backfillTenantRights),
        // A rekey while hosts run (docs/design/rekey.md): each row names the key that sealed its
        // secrets and the key of its metadata seal (NULL: written before this migration, under
        // the key the tenant's hosts then held), and a tenant may name the one key its hosts
        // write with. The database refuses a sealed value written under another key, so no host
        // that has not yet heard of the new key seals a row behind a rekey's back.
        Migration("v9-sealing-keys", statements: [
            "ALTER TABLE account ADD COLUMN sealed_by text",
            "ALTER TABLE account ADD COLUMN metadata_sealed_by text",
            "ALTER TABLE oauth_client_key ADD COLUMN sealed_by text",
            "CREATE INDEX account_sealed_by ON account (tenant, sealed_by)",
            """
            CREATE TABLE blueskyd_tenant_key (
                tenant text PRIMARY KEY,
                fingerprint text NOT NULL,
                previous text,
                since double precision NOT NULL
            )
            """,
            "ALTER TABLE blueskyd_tenant_key ENABLE ROW LEVEL SECURITY",
            "ALTER TABLE blueskyd_tenant_key FORCE ROW LEVEL SECURITY",
            "CREATE POLICY blueskyd_tenant ON blueskyd_tenant_key USING (tenant = current_user) WITH CHECK (tenant = current_user)",
            "ALTER TABLE blueskyd_host ADD COLUMN keys text[]",
            """
            CREATE FUNCTION blueskyd_check_sealing_key() RETURNS trigger LANGUAGE plpgsql AS $$
            DECLARE
                writing text;
                previous text;
            BEGIN
                SELECT k.fingerprint, k.previous INTO writing, previous FROM blueskyd_tenant_key k WHERE k.tenant = NEW.tenant;
                IF writing IS NULL THEN
                    RETURN NEW;
                END IF;
                -- While hosts take the new key up (`previous` set), the old one is still accepted.
                IF TG_TABLE_NAME = 'account' THEN
                    IF (TG_OP = 'INSERT' OR NEW.sealed_secrets IS DISTINCT FROM OLD.sealed_secrets)
                            AND NEW.sealed_by IS DISTINCT FROM writing AND NEW.sealed_by IS DISTINCT FROM previous THEN
                        RAISE EXCEPTION 'blueskyd: sealed under the key %, but tenant % now seals with the key % (a store rekey)',
                            coalesce(NEW.sealed_by, 'unnamed'), NEW.tenant, writing USING ERRCODE = 'BK001';
                    END IF;
                    IF NEW.metadata_seal IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.metadata_seal IS DISTINCT FROM OLD.metadata_seal)
                            AND NEW.metadata_sealed_by IS DISTINCT FROM writing AND NEW.metadata_sealed_by IS DISTINCT FROM previous THEN
                        RAISE EXCEPTION 'blueskyd: sealed under the key %, but tenant % now seals with the key % (a store rekey)',
                            coalesce(NEW.metadata_sealed_by, 'unnamed'), NEW.tenant, writing USING ERRCODE = 'BK001';
                    END IF;
                ELSIF (TG_OP = 'INSERT' OR NEW.sealed_key IS DISTINCT FROM OLD.sealed_key)
                        AND NEW.sealed_by IS DISTINCT FROM writing AND NEW.sealed_by IS DISTINCT FROM previous THEN
                    RAISE EXCEPTION 'blueskyd: sealed under the key %, but tenant % now seals with the key % (a store rekey)',
                        coalesce(NEW.sealed_by, 'unnamed'), NEW.tenant, writing USING ERRCODE = 'BK001';
                END IF;
                RETURN NEW;
            END
            $$
            """,
            """
            CREATE TRIGGER blueskyd_sealing_key BEFORE INSERT OR UPDATE ON account
                FOR EACH ROW EXECUTE FUNCTION blueskyd_check_sealing_key()
            """,
            """
            CREATE TRIGGER blueskyd_sealing_key BEFORE INSERT OR UPDATE ON oauth_client_key
                FOR EACH ROW EXECUTE FUNCTION blueskyd_check_sealing_key()
            """,
        ], backfill: backfillTenantKeyRights),
        // The sealing-key check fires only for writes that set a sealed column: its verdict
        // over any other write was "allowed" already (the values it checks are unchanged), and
        // a refresh's claim, schedule take and due date paid a lookup of the tenant's key each.
        Migration("v10-sealing-key-check-columns", statements: [
            "DROP TRIGGER blueskyd_sealing_key ON account",
            """
            CREATE TRIGGER blueskyd_sealing_key BEFORE INSERT OR UPDATE OF sealed_secrets, sealed_by, metadata_seal,
                metadata_sealed_by ON account FOR EACH ROW EXECUTE FUNCTION blueskyd_check_sealing_key()
            """,
        ]),
    ]

    /// One migration: statements, then (optionally) work in Swift over the rows, in the same
    /// transaction.
    struct Migration: Sendable {
        var name: String
        var statements: [String]
        var backfill: (@Sendable (PostgresSession) async throws -> Void)?

        /// `sql`: statements separated by ';' (none of which holds one).
        init(_ name: String, _ sql: String, backfill: (@Sendable (PostgresSession) async throws -> Void)? = nil) {
            self.init(name, statements: sql.split(separator: ";").map(String.init).filter { !$0.allSatisfy(\.isWhitespace) },
                      backfill: backfill)
        }

        /// Statements one by one, for those that hold a ';' (a function's body).
        init(_ name: String, statements: [String], backfill: (@Sendable (PostgresSession) async throws -> Void)? = nil) {
            self.name = name
            self.statements = statements
            self.backfill = backfill
        }
    }

    /// Works out every account's refresh server, a page of ids at a time.
    static func backfillRefreshServers(_ session: PostgresSession) async throws {
        var after = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        while true {
            let rows = try await session.run("""
                SELECT id, pds, oauth_token_endpoint FROM account WHERE id > \(after) ORDER BY id LIMIT 10000
                """).map { try $0.decode((UUID, String, String?).self) }
            guard let last = rows.last else { return }
            let servers = rows.map { AccountRecord.refreshServer(pds: $0.1, tokenEndpoint: $0.2) }
            try await session.run("""
                UPDATE account SET refresh_server = server.name
                FROM unnest(\(rows.map(\.0))::uuid[], \(servers)::text[]) AS server (id, name) WHERE account.id = server.id
                """)
            after = last.0
        }
    }

    /// Tenant roles granted rights before v8 (README's recipe then granted every table): they
    /// keep reading the migration record and the seal markers, never write them, and may take
    /// their tenant's turn on the new lock table.
    static func backfillTenantRights(_ session: PostgresSession) async throws {
        let writers = try await session.run("""
            SELECT DISTINCT quote_ident(a.grantee::regrole::text) FROM pg_class c, aclexplode(c.relacl) a
            WHERE c.oid IN ('blueskyd_migration'::regclass, 'blueskyd_tenant_sealed'::regclass)
                AND a.grantee NOT IN (0, c.relowner) AND a.privilege_type <> 'SELECT'
            """).map { try $0.decode(String.self) }
        for role in writers {
            try await session.run(PostgresQuery(unsafeSQL: "REVOKE INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER "
                                                    + "ON blueskyd_migration, blueskyd_tenant_sealed FROM \(role)"))
        }
        let tenants = try await session.run("""
            SELECT DISTINCT quote_ident(a.grantee::regrole::text) FROM pg_class c, aclexplode(c.relacl) a
            WHERE c.oid = 'account'::regclass AND a.grantee NOT IN (0, c.relowner) AND a.privilege_type = 'UPDATE'
            """).map { try $0.decode(String.self) }
        for role in tenants {
            try await session.run(PostgresQuery(unsafeSQL: "GRANT SELECT, INSERT, UPDATE ON blueskyd_tenant_lock TO \(role)"))
        }
    }

    /// Tenant roles (those that may update `account`) may name their tenant's writing key.
    static func backfillTenantKeyRights(_ session: PostgresSession) async throws {
        let tenants = try await session.run("""
            SELECT DISTINCT quote_ident(a.grantee::regrole::text) FROM pg_class c, aclexplode(c.relacl) a
            WHERE c.oid = 'account'::regclass AND a.grantee NOT IN (0, c.relowner) AND a.privilege_type = 'UPDATE'
            """).map { try $0.decode(String.self) }
        for role in tenants {
            try await session.run(PostgresQuery(unsafeSQL: "GRANT SELECT, INSERT, UPDATE, DELETE ON blueskyd_tenant_key TO \(role)"))
        }
    }

    /// How long the migrations may take: a backfill of every account (a million rows) takes far
    /// longer than the 30 s an ordinary operation gets.
    static let migrationDeadline: Duration = .seconds(15 * 60)

    /// Applies the migrations not yet applied, one host at a time: the turn is an EXCLUSIVE
    /// lock on `blueskyd_migration`, which only a role that may write it (the owner) can take,
    /// and which no tenant's reads of it hold up. When every migration is applied no lock is
    /// taken and nothing is created, so a tenant's role (which may not change the schema) opens
    /// the store too, and no tenant can stop another's start.
    func migrate() async throws(StoreError) {
        do {
            guard try await !pendingMigrations().isEmpty else { return }
            do {
                try await applyMigrations()
            } catch .database(_, let reason) where reason.contains("SQLSTATE 23505") || reason.contains("SQLSTATE 42P07") {
                // Two owners' first starts on an empty database both created the record table:
                // the one that lost reads it now.
                try await applyMigrations()
            }
        } catch .database(let context, let reason) where reason.contains("SQLSTATE 42501") {
            // A tenant's own role (row-level security) may not change the schema: the owner does.
            throw .database(context: context, reason: "\(reason); the role \(settings.user) may not change the schema: "
                                + "start blueskyd once with the role that owns the tables (blueskyd.toml(5), TENANTS)")
        }
    }

    /// The migrations `blueskyd_migration` does not record (all of them before it exists).
    private func pendingMigrations() async throws(StoreError) -> [Migration] {
        // Under the migrations' deadline: the first statements of a start wait for the pool's
        // first connections, which a loaded database may be slow to give.
        try await write("reading the schema's version", deadline: Self.migrationDeadline) { session in try await Self.pending(session) }
    }

    private static func pending(_ session: PostgresSession) async throws -> [Migration] {
        let exists = try await session.run("SELECT to_regclass('blueskyd_migration') IS NOT NULL").first?.decode(Bool.self) ?? false
        let applied = exists
            ? Set(try await session.run("SELECT name FROM blueskyd_migration").map { try $0.decode(String.self) }) : []
        return migrations.filter { !applied.contains($0.name) }
    }

    private func applyMigrations() async throws(StoreError) {
        let (logger, location) = (logger, settings.location)
        try await write("bringing the schema up to date", deadline: Self.migrationDeadline) { session in
            try await session.run("""
                CREATE TABLE IF NOT EXISTS blueskyd_migration (
                    name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())
                """)
            // A tenant's long read of the table (ACCESS SHARE) does not conflict; another
            // owner's migration does, and is waited for (bounded: the ALTERs below would wait
            // for readers of `account` too, so give up after a while and say so).
            try await session.run("SET LOCAL lock_timeout = '60s'")
            try await session.run("LOCK TABLE blueskyd_migration IN EXCLUSIVE MODE")
            for migration in try await Self.pending(session) {
                // The extended protocol takes one statement at a time.
                for statement in migration.statements {
                    try await session.run(PostgresQuery(unsafeSQL: statement))
                }
                try await migration.backfill?(session)
                try await session.run("INSERT INTO blueskyd_migration (name) VALUES (\(migration.name))")
                logger.notice("account store migrated", metadata: ["migration": "\(migration.name)", "store": "\(location)"])
            }
        }
    }
}
