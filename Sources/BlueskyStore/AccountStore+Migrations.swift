import GRDB

extension AccountStore {
    /// The schema, as named migrations. Later work (OAuth DPoP keys, nonces per
    /// (account, origin), session start times, write-ahead refresh records) adds
    /// new `registerMigration` calls at the end; never edit a shipped migration.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()

        migrator.registerMigration("v1-accounts") { db in
            try db.create(table: AccountRecord.databaseTableName) { table in
                // 16 raw UUID bytes: the same bytes authenticate the sealed secrets.
                table.primaryKey("id", .blob)
                table.column("did", .text).notNull()
                table.column("handle", .text)
                table.column("handle_verified", .boolean).notNull().defaults(to: false)
                table.column("pds", .text).notNull()
                table.column("auth_kind", .text).notNull()
                table.column("state", .text).notNull()
                table.column("state_reason", .text)
                table.column("is_default", .boolean).notNull().defaults(to: false)
                // Dates are REAL seconds since 2001-01-01 UTC (Date.storedSeconds);
                // in sqlite3: datetime(created_at + 978307200, 'unixepoch').
                table.column("created_at", .double).notNull()
                table.column("updated_at", .double).notNull()
                table.column("last_refresh_at", .double)
                table.column("access_expires_at", .double)
                table.column("refresh_expires_at", .double)
                table.column("refresh_started_at", .double)
                table.column("sealed_secrets", .blob).notNull()
            }
            try db.execute(sql: """
                CREATE UNIQUE INDEX account_did ON account(did);
                CREATE INDEX account_handle ON account(handle);
                CREATE INDEX account_created_at ON account(created_at);
                -- At most one default account, enforced by SQLite itself.
                CREATE UNIQUE INDEX account_single_default ON account(is_default) WHERE is_default = 1;
                """)
        }

        return migrator
    }
}
