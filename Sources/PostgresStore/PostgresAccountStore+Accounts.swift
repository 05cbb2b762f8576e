import AccountStoreCore
import Foundation
import PostgresNIO

extension PostgresAccountStore {
    /// Registers accounts in one transaction (all or nothing). A record inserted with
    /// `isDefault` takes over as the tenant's only default.
    /// - Throws: `.duplicateDID` for the first DID the tenant has already.
    public func insert(contentsOf accounts: [(record: AccountRecord, secrets: AccountSecrets)]) async throws(StoreError) {
        let sealer = sealer
        var rows: [(AccountRecord, Data)] = []
        rows.reserveCapacity(accounts.count)
        for account in accounts { rows.append((account.record, try sealer.seal(account.secrets, account: account.record.id))) }
        // A default changes another row first, so those go one by one; the rest many per statement.
        let chunks = rows.contains { $0.0.isDefault } ? rows.map { [$0] } : stride(from: 0, to: rows.count, by: Self.insertChunk)
            .map { Array(rows[$0..<min($0 + Self.insertChunk, rows.count)]) }
        let statements = chunks.map { (chunk: $0, query: notifying(insertStatement($0, sealedWith: sealer), ids: $0.map(\.0.id))) }
        try await insertRows(statements)
    }

    private func insertRows(_ statements: [(chunk: [(AccountRecord, Data)], query: PostgresQuery)]) async throws(StoreError) {
        // A caller told an insert failed when it had been committed would meet AccountExists at
        // every try (until a restart): its outcome is settled before it answers.
        try await writeSettlingCommit("inserting accounts") { [self] session in
            for (chunk, query) in statements {
                if let record = chunk.first?.0, chunk.count == 1, record.isDefault {
                    try await clearDefault(session, except: record.id, at: record.updatedAt)
                }
                // A taken id or DID inserts nothing instead of failing, which would abort the
                // transaction before the conflict could be explained.
                let inserted = Set(try await session.run(query).map { try $0.decode(UUID.self) })
                guard inserted.count < chunk.count else { continue }
                for (record, _) in chunk where !inserted.contains(record.id) {
                    if let conflict = try await conflict(session, for: record) { throw conflict }
                }
                throw StoreError.database(context: "inserting accounts", reason: "another host registered an account at the same moment")
            }
        }
    }

    /// Rows per INSERT: 32 parameters each, under PostgreSQL's 65,535 per statement.
    static let insertChunk = 1_000

    /// `chunk`'s secrets were sealed with `sealer`, which seals their metadata too.
    /// `withMark`: the write-ahead mark too (a copy's rows keep a refresh left unfinished).
    func insertStatement(_ chunk: [(AccountRecord, Data)], sealedWith sealer: SecretSealer, withMark: Bool = false) -> PostgresQuery {
        let columns = ["id", "tenant", "is_default", "secrets_version", "sealed_secrets", "metadata_seal", "sealed_by",
                       "metadata_sealed_by", "refresh_due_at"]
            + Self.metadataColumns + (withMark ? ["refresh_started_at"] : [])
        var binds = PostgresBindings(capacity: columns.count * chunk.count)
        var values: [String] = []
        values.reserveCapacity(chunk.count)
        for (index, (record, sealed)) in chunk.enumerated() {
            let first = index * columns.count
            values.append("(" + (1...columns.count).map { "$\(first + $0)" }.joined(separator: ", ") + ")")
            binds.append(record.id)
            binds.append(settings.tenant)
            binds.append(record.isDefault)
            binds.append(record.secretsVersion)
            binds.append(ByteBuffer(bytes: sealed))
            binds.append(ByteBuffer(bytes: sealer.metadataSeal(record, tenant: settings.tenant)))
            binds.append(sealer.writingFingerprint)
            binds.append(sealer.writingFingerprint)
            // Due at once on the shared schedule, should this host die before it records the real date.
            binds.append(record.state == .needsLogin ? nil : record.updatedAt.storedSeconds)
            Self.metadataBinds(record, into: &binds)
            if withMark { binds.append(record.refreshStartedAt?.storedSeconds) }
        }
        return PostgresQuery(unsafeSQL: "INSERT INTO account (\(columns.joined(separator: ", "))) VALUES "
            + values.joined(separator: ", ") + " ON CONFLICT DO NOTHING", binds: binds)
    }

    public func saveIdentity(_ record: AccountRecord) async throws(StoreError) {
        let tenant = settings.tenant
        try await write("saving an account's identity") { [self] session in
            // Merged into the row as it is now and sealed from it: `record` may be older than a
            // login stored meanwhile, whose auth kind and endpoints must not be sealed over.
            guard var stored = try await lockedRecord(session, id: record.id) else { throw StoreError.unknownAccount(record.id) }
            guard !stored.isAltered else { throw StoreError.recordAltered(account: record.id) }
            stored.merge(identityOf: record)
            let sealed = seal(stored)
            try await session.run(notifying("""
                UPDATE account SET handle = \(stored.handle), handle_verified = \(stored.handleVerified), pds = \(stored.pds),
                    refresh_server = \(stored.refreshServer), metadata_seal = \(sealed.bytes), metadata_sealed_by = \(sealed.by),
                    updated_at = \(stored.updatedAt.storedSeconds)
                WHERE tenant = \(tenant) AND id = \(record.id)
                """, ids: [record.id]))
        }
    }

    /// Replaces an account's session in place: the session's columns and the sealed secrets in
    /// one transaction; the id, creation date, default flag and profile stay.
    public func replaceSession(_ record: AccountRecord, secrets: AccountSecrets) async throws(StoreError) -> Int64 {
        let sealed = try seal(secrets, account: record.id)
        let tenant = settings.tenant
        return try await write("replacing an account's session") { [self] session in
            let (isDefault, metadataSeal) = try await sessionSeal(session, for: record)
            try await updateSession(session, record)
            try await session.run("DELETE FROM dpop_nonce WHERE account_id = \(record.id)")
            let rows = try await session.run("""
                UPDATE account SET sealed_secrets = \(sealed.bytes), sealed_by = \(sealed.by), metadata_seal = \(metadataSeal.bytes),
                    metadata_sealed_by = \(metadataSeal.by), is_default = \(isDefault),
                    secrets_version = secrets_version + 1,
                    refresh_started_at = NULL, lease_owner = NULL, lease_expires_at = NULL,
                    refresh_due_at = \(record.updatedAt.storedSeconds)
                WHERE tenant = \(tenant) AND id = \(record.id) RETURNING secrets_version
                """)
            guard let row = rows.first else { throw StoreError.unknownAccount(record.id) }
            return try row.decode(Int64.self)
        }
    }

    public func setProfile(id: UUID, _ profile: AccountProfile?, at: Date) async throws(StoreError) {
        let query = notifying("""
            UPDATE account SET profile_display_name = \(profile?.displayName), profile_avatar = \(profile?.avatar),
                profile_description = \(profile?.description), profile_fetched_at = \(profile?.fetchedAt.storedSeconds)
            WHERE tenant = \(settings.tenant) AND id = \(id)
            """, ids: [id])
        try await write("saving an account's profile") { session in
            guard try await session.run(query).count == 1 else { throw StoreError.unknownAccount(id) }
        }
    }

    /// Makes this account the tenant's default and every other one not, in one transaction.
    public func setDefault(id: UUID, at: Date) async throws(StoreError) {
        try await write("setting the default account") { [self] session in try await makeDefault(session, id: id, at: at) }
    }

    public func clearDefault(at: Date) async throws(StoreError) {
        try await write("clearing the default account") { [self] session in try await clearDefault(session, except: nil, at: at) }
    }

    /// Removes an account and its secrets (and its nonces, by cascade), returning what was removed.
    @discardableResult
    public func delete(id: UUID) async throws(StoreError) -> AccountRecord {
        let query = notifying("DELETE FROM account WHERE tenant = \(settings.tenant) AND id = \(id)", ids: [id],
                              returning: Self.recordColumns)
        return try await write("deleting an account") { [self] session in
            guard let row = try await session.run(query).first else { throw StoreError.unknownAccount(id) }
            return try verified(row)
        }
    }

    // MARK: - Helpers

    /// Writes a new session's columns (never the id, creation date, default flag or profile).
    func updateSession(_ session: PostgresSession, _ record: AccountRecord) async throws {
        if let conflict = try await conflict(session, for: record, checkingID: false) { throw conflict }
        let count = Self.sessionColumns.count
        let assignments = Self.sessionColumns.enumerated().map { "\($1) = $\($0 + 1)" }.joined(separator: ", ")
        var binds = PostgresBindings(capacity: count + 3)
        Self.sessionBinds(record, into: &binds)
        binds.append(settings.tenant)
        binds.append(record.id)
        let rows = try await session.run(notifying(PostgresQuery(
            unsafeSQL: "UPDATE account SET \(assignments) WHERE tenant = $\(count + 1) AND id = $\(count + 2)", binds: binds), ids: [record.id]))
        guard rows.count == 1 else { throw StoreError.unknownAccount(record.id) }
    }

    /// `statement` (an INSERT, UPDATE or DELETE of the accounts `ids`, without RETURNING) with
    /// every row it touches announced to the tenant's other hosts, in the same statement: the
    /// NOTIFY goes out when the transaction commits, and never without it. Each payload is
    /// signed here (`ChangeSigner`); the rows come back with `columns`, which hold `id`.
    func notifying(_ statement: PostgresQuery, ids: [UUID], returning columns: String = "id") -> PostgresQuery {
        var query = statement
        let (leaseOwner, signers) = (leaseOwner, signers)
        if signers.count == 1, let signer = signers.first {
            query.binds.append(signer.channel)
            let channel = query.binds.count
            query.binds.append(ids)
            query.binds.append(ids.map { signer.payload(owner: leaseOwner, id: $0) })
            query.sql = Self.announcedOnOneChannel(statement.sql, returning: columns, channel: channel)
            return query
        }
        // A host holding two keys (a rekey while hosts run) announces on both channels; still
        // one row per changed row, with one column after `columns`.
        let first = query.binds.count + 1
        query.binds.append(signers.flatMap { _ in ids })
        query.binds.append(signers.flatMap { signer in ids.map { _ in signer.channel } })
        query.binds.append(signers.flatMap { signer in ids.map { signer.payload(owner: leaseOwner, id: $0) } })
        query.sql = """
            WITH changed AS (\(statement.sql) RETURNING \(columns))
            SELECT changed.*, (SELECT string_agg(pg_notify(n.channel, n.payload)::text, '')
                FROM unnest($\(first)::uuid[], $\(first + 1)::text[], $\(first + 2)::text[]) AS n (id, channel, payload)
                WHERE n.id = changed.id) FROM changed
            """
        return query
    }

    /// `sql`, whose parameters end before `$channel`, with each row it changes announced on one
    /// channel: `$channel` names it, `$channel + 1` and `$channel + 2` are the ids and their
    /// payloads. `notifying` builds its one-channel form with it, the prepared save its text.
    static func announcedOnOneChannel(_ sql: String, returning columns: String, channel: Int) -> String {
        """
        WITH changed AS (\(sql) RETURNING \(columns))
        SELECT changed.*, pg_notify($\(channel), n.payload) FROM changed
        JOIN unnest($\(channel + 1)::uuid[], $\(channel + 2)::text[]) AS n (id, payload) ON n.id = changed.id
        """
    }

    /// The store error explaining why `record` would break a uniqueness rule, if it would.
    func conflict(_ session: PostgresSession, for record: AccountRecord, checkingID: Bool = true) async throws -> StoreError? {
        let rows = try await session.run("""
            SELECT id FROM account WHERE tenant = \(settings.tenant) AND did = \(record.did) AND id <> \(record.id)
            """)
        if let existing = rows.first { return .duplicateDID(existing: try existing.decode(UUID.self)) }
        guard checkingID else { return nil }
        let taken = try await session.run("SELECT 1 FROM account WHERE id = \(record.id)")
        return taken.isEmpty ? nil : .duplicateAccountID(record.id)
    }

    /// Binds for a statement written with `$n` placeholders; nil binds SQL NULL.
    static func binds(_ values: (any PostgresDynamicTypeEncodable)?...) -> PostgresBindings {
        var binds = PostgresBindings(capacity: values.count)
        for value in values {
            if let value { binds.append(value) } else { binds.appendNull() }
        }
        return binds
    }
}
