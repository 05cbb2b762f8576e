import AccountStoreCore
import GRDB

extension SQLiteAccountStore {
    /// The schema, as named migrations. Later work (OAuth DPoP keys, nonces per
    /// (account, origin), session start times, write-ahead refresh records) adds
    /// new `registerMigration` calls at the end; never edit a shipped migration.
    static func migrator(sealer: SecretSealer) -> DatabaseMigrator {
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

        migrator.registerMigration("v2-oauth") { db in
            // OAuth sessions: NULL for app-password accounts. The endpoints are kept so that
            // refresh and logout need no discovery (the issuer stays the trust anchor).
            try db.alter(table: AccountRecord.databaseTableName) { table in
                table.add(column: "oauth_issuer", .text)
                table.add(column: "oauth_token_endpoint", .text)
                table.add(column: "oauth_revocation_endpoint", .text)
                table.add(column: "oauth_scope", .text)
                table.add(column: "oauth_session_started_at", .double)
                table.add(column: "oauth_client_kind", .text)
                table.add(column: "oauth_client_id", .text)
            }
            // The latest DPoP nonce per (account, server origin). Not secret; plain text.
            try db.create(table: "dpop_nonce") { table in
                table.column("account_id", .blob).notNull()
                    .references(AccountRecord.databaseTableName, column: "id", onDelete: .cascade)
                table.column("origin", .text).notNull()
                table.column("nonce", .text).notNull()
                table.column("received_at", .double).notNull()
                table.primaryKey(["account_id", "origin"])
            }
        }

        migrator.registerMigration("v3-oauth-client-keys") { db in
            // Confidential clients: which signing key a session authenticates with.
            try db.alter(table: AccountRecord.databaseTableName) { table in
                table.add(column: "oauth_client_key_id", .text)
            }
            // The client's private_key_jwt signing keys, sealed like account secrets.
            try db.create(table: "oauth_client_key") { table in
                table.primaryKey("key_id", .text)
                table.column("sealed_key", .blob).notNull()
                table.column("created_at", .double).notNull()
            }
        }

        migrator.registerMigration("v4-profile") { db in
            // The account's cached Bluesky profile (fetched_at NULL: none cached).
            try db.alter(table: AccountRecord.databaseTableName) { table in
                table.add(column: "profile_display_name", .text)
                table.add(column: "profile_avatar", .text)
                table.add(column: "profile_description", .text)
                table.add(column: "profile_fetched_at", .double)
            }
        }

        migrator.registerMigration("v5-leases") { db in
            // The generation of the sealed secrets (a fencing number: tokens are saved only over
            // the generation they were refreshed from) and the refresh lease: the write-ahead
            // mark's owner and how long it holds. One host uses the same columns as several.
            try db.alter(table: AccountRecord.databaseTableName) { table in
                table.add(column: "secrets_version", .integer).notNull().defaults(to: 1)
                table.add(column: "lease_owner", .text)
                table.add(column: "lease_expires_at", .double)
            }
        }

        migrator.registerMigration("v6-page-order") { db in
            // Pages of accounts in listing order (start-up, a resynchronisation) seek here.
            try db.execute(sql: "CREATE INDEX account_page ON account(created_at, id)")
        }

        migrator.registerMigration("v7-metadata-seal") { db in
            // A MAC under the store key over the columns that decide where tokens go. Rows
            // there are get none here: a migration that sealed whatever it found would bless a
            // row rewritten by someone without the key (drop the column, delete this
            // migration's record, point `pds` elsewhere). They read as altered until the
            // operator seals them (`blueskyd store reseal`).
            try db.alter(table: AccountRecord.databaseTableName) { table in
                table.add(column: "metadata_seal", .blob)
            }
        }

        return migrator
    }
}
