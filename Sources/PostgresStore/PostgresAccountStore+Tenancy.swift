import AccountStoreCore
import Foundation
import PostgresNIO

/// What keeps one tenant's accounts its own: the metadata seal on every row, and the role a
/// tenant connects as, which row-level security holds to that tenant's rows.
extension PostgresAccountStore {
    /// The record in `row` (selected with `recordColumns`), marked altered when its metadata
    /// seal does not hold: someone without the store key rewrote where its tokens would go.
    func verified(_ row: PostgresRow) throws -> AccountRecord {
        let record = try Self.record(row)
        let seal = try row.makeRandomAccess()["metadata_seal"].decode(ByteBuffer?.self).map { Data(buffer: $0) }
        return record.verified(by: sealer.check(record, tenant: settings.tenant, seal: seal))
    }

    func seal(_ record: AccountRecord) -> ByteBuffer {
        ByteBuffer(bytes: sealer.metadataSeal(record, tenant: settings.tenant))
    }

    /// Row-level security (forced, so the tables' owner too) holds every role to the rows of the
    /// tenant named like it; one that bypasses it (a superuser, BYPASSRLS) would see every
    /// tenant's. A host whose role and tenant differ would see no account and write rows it
    /// can never read back; a tenant's role that may write the migration record or the seal
    /// markers, or create tables, could stop or forge the schema for every tenant. Each is
    /// refused at start, saying what to change.
    func checkTenantRole() async throws(StoreError) {
        let (tenant, user) = (settings.tenant, settings.user)
        let role = try await read("checking the role's tenant") { session in
            try await session.run("""
                SELECT current_user::text, r.rolsuper OR r.rolbypassrls, pg_has_role(current_user, c.relowner, 'MEMBER'),
                    has_table_privilege('blueskyd_migration', 'INSERT, UPDATE, DELETE, TRUNCATE')
                        OR has_table_privilege('blueskyd_tenant_sealed', 'INSERT, UPDATE, DELETE, TRUNCATE')
                        OR has_schema_privilege(c.relnamespace, 'CREATE')
                FROM pg_roles r, pg_class c WHERE r.rolname = current_user AND c.oid = 'account'::regclass
                """).first.map { try $0.decode((String, Bool, Bool, Bool).self) }
        }
        guard let (name, bypasses, owns, mayChangeSchema) = role else { return }
        if bypasses {
            throw StoreError.invalidSetting(
                "the role \(user) bypasses row-level security (a superuser, or BYPASSRLS): it would see every tenant's "
                    + "accounts; connect as a role of the tenant's own, NOSUPERUSER NOBYPASSRLS (blueskyd.toml(5), TENANTS)")
        }
        if name != tenant {
            throw StoreError.invalidSetting(
                "the role \(user) is held by row-level security to the rows of tenant \"\(name)\", but tenant is \"\(tenant)\": "
                    + "set tenant = \"\(name)\" in blueskyd.toml, or connect as a role named \"\(tenant)\" (blueskyd.toml(5), TENANTS)")
        }
        if !owns, mayChangeSchema {
            throw StoreError.invalidSetting(
                "the role \(user) may write blueskyd_migration or blueskyd_tenant_sealed, or create tables, which would let "
                    + "it hold up or forge the schema of every tenant: as the owner, run REVOKE INSERT, UPDATE, DELETE, TRUNCATE "
                    + "ON blueskyd_migration, blueskyd_tenant_sealed FROM \(name); REVOKE CREATE ON SCHEMA public FROM \(name), "
                    + "PUBLIC (blueskyd.toml(5), TENANTS)")
        }
    }
}
