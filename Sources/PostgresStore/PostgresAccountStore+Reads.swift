import AccountStoreCore
import Foundation
import PostgresNIO

extension PostgresAccountStore {
    public func account(id: UUID) async throws(StoreError) -> AccountRecord? {
        try await records("looking up an account by id", where: "id = $2", Self.binds(settings.tenant, id)).first
    }

    /// One query for them all (the ids bound as one array).
    public func accounts(ids: [UUID]) async throws(StoreError) -> [AccountRecord] {
        guard !ids.isEmpty else { return [] }
        return try await records("looking up accounts by id", where: "id = ANY($2::uuid[])", Self.binds(settings.tenant, ids))
    }

    public func account(did: String) async throws(StoreError) -> AccountRecord? {
        try await records("looking up an account by DID", where: "did = $2", Self.binds(settings.tenant, did)).first
    }

    /// A page of the tenant's accounts, oldest first, seeking past `key` (keyset paging on the
    /// `(tenant, created_at, id)` index).
    public func accounts(after key: AccountPageKey?, limit: Int) async throws(StoreError) -> [AccountRecord] {
        guard let key else {
            return try await records("listing accounts", where: "true", Self.binds(settings.tenant), limit: limit)
        }
        return try await records("listing accounts", where: "(created_at, id) > ($2, $3)",
                                 Self.binds(settings.tenant, key.createdAt.storedSeconds, key.id), limit: limit)
    }

    public func portableAccounts(after key: AccountPageKey?, limit: Int) async throws(StoreError) -> [PortableAccount] {
        let tenant = settings.tenant
        let (condition, binds) = key.map { ("(created_at, id) > ($2, $3)", Self.binds(tenant, $0.createdAt.storedSeconds, $0.id)) }
            ?? ("true", Self.binds(tenant))
        let query = PostgresQuery(unsafeSQL: "SELECT \(Self.recordColumns), sealed_secrets FROM account WHERE tenant = $1 AND "
                                    + "\(condition) ORDER BY created_at, id LIMIT \(limit)", binds: binds)
        let rows = try await read("reading accounts to copy") { [self] session in
            try await session.run(query).map { row in
                (try verified(row), Data(buffer: try row.makeRandomAccess()["sealed_secrets"].decode(ByteBuffer.self)))
            }
        }
        return try rows.map { (record, blob) throws(StoreError) in
            guard !record.isAltered else { throw StoreError.recordAltered(account: record.id) }
            return PortableAccount(record: record, secrets: try sealer.open(blob, account: record.id))
        }
    }

    public func count() async throws(StoreError) -> Int {
        let tenant = settings.tenant
        return try await read("counting accounts") { session in
            try await session.run("SELECT count(*) FROM account WHERE tenant = \(tenant)").first.map {
                Int(try $0.decode(Int64.self))
            } ?? 0
        }
    }

    /// Opens the sealed secrets of one of the tenant's accounts, once its metadata seal holds:
    /// tokens of a row rewritten by someone without the store key are never handed out.
    public func secrets(for id: UUID) async throws(StoreError) -> AccountSecrets {
        let query = PostgresQuery(
            unsafeSQL: "SELECT \(Self.recordColumns), sealed_secrets FROM account WHERE tenant = $1 AND id = $2",
            binds: Self.binds(settings.tenant, id))
        let found = try await read("reading account secrets") { [self] session -> (AccountRecord, ByteBuffer, String?)? in
            guard let row = try await session.run(query).first else { return nil }
            let cells = row.makeRandomAccess()
            return (try verified(row), try cells["sealed_secrets"].decode(ByteBuffer.self), try cells["sealed_by"].decode(String?.self))
        }
        guard let (record, blob, sealedBy) = found else { throw StoreError.unknownAccount(id) }
        return try openSecrets(of: record, sealed: blob, by: sealedBy)
    }

    /// The secrets of a row read with its record (`sealed_secrets` and `sealed_by`), once the
    /// record's metadata seal holds.
    func openSecrets(of record: AccountRecord, sealed blob: ByteBuffer, by sealedBy: String?) throws(StoreError) -> AccountSecrets {
        guard !record.isAltered else { throw StoreError.recordAltered(account: record.id) }
        let sealer = sealer
        do {
            return try sealer.open(Data(buffer: blob), account: record.id)
        } catch {
            // Under a key this host lacks: not a changed blob, a host behind a rekey.
            if let sealedBy { try requireHeld(sealedBy, sealer: sealer, account: record.id) }
            throw error
        }
    }

    /// Checks that the store key opens one account's secrets and every client key: a host
    /// given another key than its peers stops at start instead of failing every refresh.
    public func verifyKey() async throws(StoreError) {
        let tenant = settings.tenant
        let samples = try await read("checking the store key") { session in try await Self.keySamples(tenant, on: session) }
        try StoreKeyCheck(sealer: sealer, tenant: tenant).verify(samples)
        _ = try await clientKeys()
    }

    /// The tenant's first rows, as the key check reads them (`StoreKeyCheck.sampleSize`).
    private static func keySamples(_ tenant: String, on session: PostgresSession) async throws -> [StoreKeyCheck.Sample] {
        let query = PostgresQuery(unsafeSQL: "SELECT \(recordColumns), sealed_secrets FROM account WHERE tenant = $1 "
                                    + "ORDER BY created_at, id LIMIT \(StoreKeyCheck.sampleSize)", binds: binds(tenant))
        return try await session.run(query).map { row in
            let (parsed, seal, blob) = try sealedParts(row)
            return StoreKeyCheck.Sample(id: parsed.record.id, row: parsed, seal: seal, blob: blob)
        }
    }

    /// `verifyKey` for a host that starts, in one transaction under the tenant's lock (shared),
    /// which also says this host is alive. A `store rekey` holds that lock for its whole pass
    /// and refuses while a host of the tenant is alive: a host that starts meanwhile waits for
    /// the pass to end and then finds the rows under the new key (and stops), or is found alive
    /// by the pass, which then writes nothing (a blind attack started a host between the pass's
    /// first check and its commit, and it ran on the old key).
    public func verifyKeyAsHost() async throws(StoreError) {
        let (tenant, me, aliveFor, sealer, location) = (settings.tenant, leaseOwner, aliveFor, sealer, location)
        try await write("checking the store key") { session in
            try await session.run("INSERT INTO blueskyd_tenant_lock (tenant) VALUES (\(tenant)) ON CONFLICT DO NOTHING")
            try await session.run("SELECT 1 FROM blueskyd_tenant_lock WHERE tenant = \(tenant) FOR SHARE")
            try await Self.requireWritingKey(tenant, sealer: sealer, location: location, on: session)
            let samples = try await Self.keySamples(tenant, on: session)
            try StoreKeyCheck(sealer: sealer, tenant: tenant).verify(samples)
            try await session.run("""
                INSERT INTO blueskyd_host (tenant, owner, alive_until, keys)
                VALUES (\(tenant), \(me), \(unescaped: Self.databaseNow) + \(aliveFor), \(sealer.fingerprints))
                ON CONFLICT (tenant, owner) DO UPDATE SET alive_until = excluded.alive_until, keys = excluded.keys
                WHERE blueskyd_host.alive_until >= 0
                """)
        }
        _ = try await clientKeys()
    }

    /// The lease on an account's refresh as stored, for diagnostics and tests.
    public func refreshLease(id: UUID) async throws(StoreError) -> (owner: String, until: Date)? {
        let tenant = settings.tenant
        return try await read("reading a refresh lease") { session in
            guard let row = try await session.run("""
                SELECT lease_owner, lease_expires_at FROM account WHERE tenant = \(tenant) AND id = \(id)
                """).first else { return nil }
            let (owner, until) = try row.decode((String?, Double?).self)
            guard let owner, let until else { return nil }
            return (owner, Date(storedSeconds: until))
        }
    }

    private func records(_ context: String, where condition: String, _ binds: PostgresBindings,
                         limit: Int? = nil) async throws(StoreError) -> [AccountRecord] {
        let sql = "SELECT \(Self.recordColumns) FROM account WHERE tenant = $1 AND \(condition) ORDER BY created_at, id"
            + (limit.map { " LIMIT \($0)" } ?? "")
        let query = PostgresQuery(unsafeSQL: sql, binds: binds)
        return try await read(context) { [self] session in try await session.run(query).map(verified) }
    }
}
