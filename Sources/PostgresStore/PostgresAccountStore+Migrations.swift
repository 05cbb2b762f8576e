import BlueskyStore
import PostgresNIO

extension PostgresAccountStore {
    /// The schema, as named migrations applied once each, in order. Never edit a shipped one;
    /// add another at the end. The columns are SQLite's (dates as seconds since 2001-01-01, so
    /// that both stores round-trip a `Date` exactly) plus the tenant.
    static let migrations: [(name: String, sql: String)] = [
        ("v1-shared-store", """
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
        ("v2-shared-schedule", """
            ALTER TABLE account ADD COLUMN refresh_due_at double precision;
            UPDATE account SET refresh_due_at = COALESCE(access_expires_at - 360, updated_at) WHERE state <> 'needs-login';
            CREATE INDEX account_tenant_refresh_due ON account (tenant, refresh_due_at)
            """),
    ]

    /// How long one migration statement may take: a backfill of every account (a million
    /// rows) takes far longer than the 30 s an ordinary statement gets.
    static let migrationStatementTimeout: TimeAmount = .minutes(15)

    /// Applies the migrations not yet applied. Hosts starting together take turns on an
    /// advisory lock, so each migration runs once.
    func migrate() throws {
        try pool.transaction(timeout: Self.migrationStatementTimeout) { session in
            try session.run("SELECT pg_advisory_xact_lock(hashtext('blueskyd schema'))")
            try session.run("""
                CREATE TABLE IF NOT EXISTS blueskyd_migration (
                    name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())
                """)
            let applied = Set(try session.run("SELECT name FROM blueskyd_migration").rows.map { try $0.decode(String.self) })
            for migration in Self.migrations where !applied.contains(migration.name) {
                // The extended protocol takes one statement at a time; none of these holds a ';'.
                for statement in migration.sql.split(separator: ";") where !statement.allSatisfy(\.isWhitespace) {
                    try session.run(PostgresQuery(unsafeSQL: String(statement)))
                }
                try session.run("INSERT INTO blueskyd_migration (name) VALUES (\(migration.name))")
                logger.notice("account store migrated", metadata: ["migration": "\(migration.name)", "store": "\(location)"])
            }
        }
    }
}
