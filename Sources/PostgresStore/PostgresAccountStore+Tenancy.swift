import AccountStoreCore
import Foundation
import PostgresNIO

/// What keeps one tenant's accounts its own: the metadata seal on every row, and the role a
/// tenant connects as, which row-level security holds to that tenant's rows.
extension PostgresAccountStore {
    /// The record in `row` (selected with `recordColumns`), marked altered when its metadata
    /// seal does not hold: someone without the store key rewrote where its tokens would go.
    /// So is a row a column of which holds what blueskyd cannot read (`UnreadableRow`).
    ///
    /// A seal made under the tenant's key when this host does not hold it (a rekey named it
    /// while this host ran without it) says nothing of the row: that is refused as a failed
    /// read, and the row is never marked altered by a host that is merely behind. A row naming
    /// any other key this host lacks (a name anyone who can write the row can write) is read as
    /// altered, as before: one such row never stops the reading of the others.
    func verified(_ row: PostgresRow) throws -> AccountRecord {
        let cells = row.makeRandomAccess()
        let seal = try cells["metadata_seal"].decode(ByteBuffer?.self).map { Data(buffer: $0) }
        let sealer = sealer
        let record = try Self.parsed(row).verified { sealer.check($0, tenant: settings.tenant, seal: seal) }
        if record.isAltered, let key = try cells["metadata_sealed_by"].decode(String?.self) {
            try requireHeld(key, sealer: sealer, account: record.id)
        }
        return record
    }

    /// Throws when `key` (a row's `sealed_by` or `metadata_sealed_by`) is the tenant's key and
    /// not one of this host's.
    func requireHeld(_ key: String, sealer: SecretSealer, account: UUID) throws(StoreError) {
        guard !sealer.fingerprints.contains(key), tenantKey.withLock({ $0 }) == key else { return }
        throw StoreError.database(context: "reading account \(account.uuidString.lowercased())",
                                  reason: "it is sealed under the key \(key), which this host does not hold (a store rekey): "
                                    + "restart this host with that key installed")
    }

    /// `record`'s metadata seal and the fingerprint of the key that made it (`metadata_sealed_by`),
    /// from one read of the sealer: the two are written together.
    func seal(_ record: AccountRecord) -> Sealed {
        let sealer = sealer
        return Sealed(bytes: ByteBuffer(bytes: sealer.metadataSeal(record, tenant: settings.tenant)), by: sealer.writingFingerprint)
    }

    /// `secrets` sealed for `account`, and the fingerprint of the key that sealed them (`sealed_by`).
    func seal(_ secrets: AccountSecrets, account: UUID) throws(StoreError) -> Sealed {
        let sealer = sealer
        return Sealed(bytes: ByteBuffer(bytes: try sealer.seal(secrets, account: account)), by: sealer.writingFingerprint)
    }

    /// Row-level security (forced, so the tables' owner too) holds every role to the rows of the
    /// tenant named like it; one that bypasses it (a superuser, BYPASSRLS, or a member of such a
    /// role) would see every tenant's. A host whose role and tenant differ would see no account
    /// and write rows it can never read back. A tenant's role that may change what every tenant
    /// relies on (the migration record or seal markers, even one column; tables, schemas or
    /// roles; the owner's or another login role's rights through membership) could stop or
    /// forge the schema, or read another tenant. And the tables must still be held as blueskyd
    /// made them: a policy dropped or loosened, or row-level security switched off, is the mark
    /// of someone with the owner's rights. Each is refused at start, saying what to change.
    func checkTenantRole() async throws(StoreError) {
        let (tenant, user) = (settings.tenant, settings.user)
        let facts = try await read("checking the role's tenant") { session in
            try await session.run("""
                SELECT current_user::text,
                    EXISTS (SELECT 1 FROM pg_roles s WHERE (s.rolsuper OR s.rolbypassrls) AND pg_has_role(current_user, s.oid, 'MEMBER')),
                    r.oid = c.relowner,
                    pg_has_role(current_user, c.relowner, 'MEMBER') AND r.oid <> c.relowner,
                    has_any_column_privilege('blueskyd_migration', 'INSERT, UPDATE')
                        OR has_table_privilege('blueskyd_migration', 'DELETE, TRUNCATE')
                        OR has_any_column_privilege('blueskyd_tenant_sealed', 'INSERT, UPDATE')
                        OR has_table_privilege('blueskyd_tenant_sealed', 'DELETE, TRUNCATE')
                        OR has_schema_privilege(c.relnamespace, 'CREATE')
                        OR has_database_privilege(current_database(), 'CREATE')
                        OR r.rolcreaterole,
                    EXISTS (SELECT 1 FROM pg_roles o WHERE o.rolcanlogin AND o.oid <> r.oid
                            AND pg_has_role(current_user, o.oid, 'MEMBER')),
                    (SELECT string_agg(t.relname, ', ' ORDER BY t.relname) FROM pg_class t
                     WHERE t.relnamespace = c.relnamespace AND t.relname = ANY(\(Self.tenantTables))
                        AND NOT (t.relrowsecurity AND t.relforcerowsecurity
                            AND (SELECT count(*) FROM pg_policy p WHERE p.polrelid = t.oid) = 1
                            AND EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = t.oid AND p.polname = 'blueskyd_tenant'
                                AND p.polpermissive AND p.polcmd = '*' AND p.polroles = '{0}'
                                AND regexp_replace(pg_get_expr(p.polqual, p.polrelid), '\\s+', ' ', 'g')
                                    = CASE WHEN t.relname = 'dpop_nonce'
                                        THEN '(EXISTS ( SELECT 1 FROM account a WHERE (a.id = dpop_nonce.account_id)))'
                                        ELSE '(tenant = CURRENT_USER)' END)))
                FROM pg_roles r, pg_class c WHERE r.rolname = current_user AND c.oid = 'account'::regclass
                """).first.map { try $0.decode((String, Bool, Bool, Bool, Bool, Bool, String?).self) }
        }
        guard let (name, bypasses, owns, inheritsOwner, mayChangeSchema, actsAsOther, loosened) = facts else { return }
        let hint = "(blueskyd.toml(5), TENANTS)"
        if let loosened {
            throw StoreError.invalidSetting(
                "row-level security on \(loosened) is not as blueskyd made it (switched off, not forced, or a policy dropped, "
                    + "added or changed): someone with the owner's rights changed the schema, and every tenant's rows may be "
                    + "open; restore it (ALTER TABLE … FORCE ROW LEVEL SECURITY, the blueskyd_tenant policy) \(hint)")
        }
        if bypasses {
            throw StoreError.invalidSetting(
                "the role \(user) bypasses row-level security (a superuser, BYPASSRLS, or a member of one): it would see every "
                    + "tenant's accounts; connect as a role of the tenant's own, NOSUPERUSER NOBYPASSRLS \(hint)")
        }
        if name != tenant {
            throw StoreError.invalidSetting(
                "the role \(user) is held by row-level security to the rows of tenant \"\(name)\", but tenant is \"\(tenant)\": "
                    + "set tenant = \"\(name)\" in blueskyd.toml, or connect as a role named \"\(tenant)\" \(hint)")
        }
        if inheritsOwner || (!owns && (mayChangeSchema || actsAsOther)) {
            throw StoreError.invalidSetting(
                "the role \(user) may change what every tenant relies on (it is a member of the tables' owner or of another "
                    + "login role, may create roles, schemas or tables, or may write blueskyd_migration or blueskyd_tenant_sealed, "
                    + "even one column): it could stop or forge the schema, or read another tenant; give the tenant a role of "
                    + "its own in blueskyd_tenants only, and as the administrator run REVOKE INSERT, UPDATE, DELETE, TRUNCATE "
                    + "ON blueskyd_migration, blueskyd_tenant_sealed FROM \(name); REVOKE CREATE ON SCHEMA public FROM \(name), "
                    + "PUBLIC; REVOKE CREATE ON DATABASE \(settings.database) FROM \(name), PUBLIC \(hint)")
        }
    }

    /// The tables row-level security holds to a tenant.
    static let tenantTables = ["account", "oauth_client_key", "dpop_nonce", "blueskyd_host", "blueskyd_clock",
                               "blueskyd_tenant_sealed", "blueskyd_tenant_lock"]
}
