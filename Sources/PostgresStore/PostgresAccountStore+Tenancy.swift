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
        return sealer.isSealed(record, tenant: settings.tenant, seal: seal) ? record : record.markedAltered()
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

    /// Seals this tenant's rows the first time one of its hosts opens the store after the
    /// metadata seal came in, with this host's key, and records that it did: from then on a
    /// row without a seal reads as altered. A row whose secrets do not open under this key is
    /// not sealed with it (the key is wrong, and sealing would make every row look altered
    /// once the right key is back): the start fails instead.
    func sealTenantRows() async throws(StoreError) {
        let (tenant, sealer, logger) = (settings.tenant, sealer, logger)
        try await write("sealing the accounts' metadata", deadline: Self.migrationDeadline) { session in
            try await session.run("SELECT pg_advisory_xact_lock(hashtext('blueskyd seal of ' || \(tenant)))")
            let done = try await session.run("SELECT 1 FROM blueskyd_tenant_sealed WHERE tenant = \(tenant)").first != nil
            guard !done else { return }
            var sealedCount = 0
            while true {
                let rows = try await session.run(PostgresQuery(
                    unsafeSQL: "SELECT \(Self.recordColumns), sealed_secrets FROM account "
                        + "WHERE tenant = $1 AND metadata_seal IS NULL ORDER BY id LIMIT 1000",
                    binds: Self.binds(tenant)))
                guard !rows.isEmpty else { break }
                var ids: [UUID] = []
                var seals: [ByteBuffer] = []
                for row in rows {
                    let record = try Self.record(row)
                    let blob = try row.makeRandomAccess()["sealed_secrets"].decode(ByteBuffer.self)
                    _ = try sealer.open(Data(buffer: blob), account: record.id)
                    ids.append(record.id)
                    seals.append(ByteBuffer(bytes: sealer.metadataSeal(record, tenant: tenant)))
                }
                try await session.run("""
                    UPDATE account SET metadata_seal = sealed.seal
                    FROM unnest(\(ids)::uuid[], \(seals)::bytea[]) AS sealed (id, seal)
                    WHERE account.tenant = \(tenant) AND account.id = sealed.id
                    """)
                sealedCount += ids.count
            }
            try await session.run("""
                INSERT INTO blueskyd_tenant_sealed (tenant, sealed_at) VALUES (\(tenant), \(Date().storedSeconds))
                """)
            if sealedCount > 0 {
                logger.notice("sealed the accounts' metadata", metadata: ["tenant": "\(tenant)", "accounts": "\(sealedCount)"])
            }
        }
    }
}
