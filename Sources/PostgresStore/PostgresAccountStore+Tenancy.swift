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

    /// Row-level security holds a role that neither owns the tables nor bypasses it to the rows
    /// of the tenant named like the role. A tenant of another name would see no account at all
    /// and create rows it can never read back: refuse to start, saying which name to use.
    func checkTenantRole() async throws(StoreError) {
        let (tenant, user) = (settings.tenant, settings.user)
        let role = try await read("checking the role's tenant") { session in
            try await session.run("""
                SELECT current_user::text, r.rolsuper OR r.rolbypassrls OR pg_has_role(current_user, c.relowner, 'MEMBER')
                FROM pg_roles r, pg_class c WHERE r.rolname = current_user AND c.oid = 'account'::regclass
                """).first.map { try $0.decode((String, Bool).self) }
        }
        guard let (name, unrestricted) = role, !unrestricted, name != tenant else { return }
        throw StoreError.invalidSetting(
            "the role \(user) is held by row-level security to the rows of tenant \"\(name)\", but tenant is \"\(tenant)\": "
                + "set tenant = \"\(name)\" in blueskyd.toml, or connect as a role named \"\(tenant)\" (blueskyd.toml(5), TENANTS)")
    }
}
