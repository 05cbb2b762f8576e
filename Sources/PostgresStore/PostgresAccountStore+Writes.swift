import BlueskyStore
import Foundation
import PostgresNIO

extension PostgresAccountStore {
    /// Registers accounts in one transaction (all or nothing). A record inserted with
    /// `isDefault` takes over as the tenant's only default.
    /// - Throws: `StoreError.duplicateDID` for the first DID the tenant has already.
    public func insert(contentsOf accounts: [(record: AccountRecord, secrets: AccountSecrets)]) throws {
        let rows = try accounts.map { ($0.record, try sealer.seal($0.secrets, account: $0.record.id)) }
        // A default changes another row first, so those go one by one; the rest many per statement.
        let chunks = rows.contains { $0.0.isDefault } ? rows.map { [$0] } : stride(from: 0, to: rows.count, by: Self.insertChunk)
            .map { Array(rows[$0..<min($0 + Self.insertChunk, rows.count)]) }
        try write("inserting accounts") { session in
            for chunk in chunks {
                if let record = chunk.first?.0, chunk.count == 1, record.isDefault {
                    try clearDefault(session, except: record.id, at: record.updatedAt)
                }
                // A taken id or DID inserts nothing instead of failing, which would abort the
                // transaction before the conflict could be explained.
                let inserted = Set(try session.run(notifying(insertStatement(chunk))).rows.map { try $0.decode(UUID.self) })
                guard inserted.count < chunk.count else { continue }
                for (record, _) in chunk where !inserted.contains(record.id) {
                    if let conflict = try conflict(session, for: record) { throw conflict }
                }
                throw StoreError.database(context: "inserting accounts", reason: "another host registered an account at the same moment")
            }
        }
    }

    /// Rows per INSERT: 30 parameters each, under PostgreSQL's 65,535 per statement.
    static let insertChunk = 1_000

    private func insertStatement(_ chunk: [(AccountRecord, Data)]) throws -> PostgresQuery {
        let columns = ["id", "tenant", "is_default", "secrets_version", "sealed_secrets", "refresh_due_at"]
            + Self.metadataColumns
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
            // Due at once on the shared schedule, should this host die before it records the real date.
            binds.append(record.state == .needsLogin ? nil : record.updatedAt.storedSeconds)
            try Self.metadataBinds(record, into: &binds)
        }
        return PostgresQuery(unsafeSQL: "INSERT INTO account (\(columns.joined(separator: ", "))) VALUES "
            + values.joined(separator: ", ") + " ON CONFLICT DO NOTHING", binds: binds)
    }

    public func saveIdentity(_ record: AccountRecord) throws {
        try write("saving an account's identity") { session in
            let changed = try session.run(notifying("""
                UPDATE account SET handle = \(record.handle), handle_verified = \(record.handleVerified), pds = \(record.pds),
                    oauth_scope = \(record.oauth?.scope), updated_at = \(record.updatedAt.storedSeconds)
                WHERE tenant = \(settings.tenant) AND id = \(record.id)
                """)).rows.count
            guard changed == 1 else { throw StoreError.unknownAccount(record.id) }
        }
    }

    public func replaceSession(_ record: AccountRecord, secrets: AccountSecrets) throws -> Int64 {
        let sealed = ByteBuffer(bytes: try sealer.seal(secrets, account: record.id))
        return try write("replacing an account's session") { session in
            try updateMetadata(session, record)
            try session.run("DELETE FROM dpop_nonce WHERE account_id = \(record.id)")
            let rows = try session.run("""
                UPDATE account SET sealed_secrets = \(sealed), secrets_version = secrets_version + 1,
                    refresh_started_at = NULL, lease_owner = NULL, lease_expires_at = NULL,
                    refresh_due_at = \(record.updatedAt.storedSeconds)
                WHERE tenant = \(settings.tenant) AND id = \(record.id) RETURNING secrets_version
                """).rows
            guard let row = rows.first else { throw StoreError.unknownAccount(record.id) }
            return try row.decode(Int64.self)
        }
    }

    public func setProfile(id: UUID, _ profile: AccountProfile?, at: Date) throws {
        try write("saving an account's profile") { session in
            let changed = try session.run(notifying("""
                UPDATE account SET profile_display_name = \(profile?.displayName), profile_avatar = \(profile?.avatar),
                    profile_description = \(profile?.description), profile_fetched_at = \(profile?.fetchedAt.storedSeconds)
                WHERE tenant = \(settings.tenant) AND id = \(id)
                """)).rows.count
            guard changed == 1 else { throw StoreError.unknownAccount(id) }
        }
    }

    /// Makes this account the tenant's default and every other one not, in one transaction.
    public func setDefault(id: UUID, at: Date) throws {
        try write("setting the default account") { session in
            let exists = try session.run("SELECT 1 FROM account WHERE tenant = \(settings.tenant) AND id = \(id)").rows
            guard !exists.isEmpty else { throw StoreError.unknownAccount(id) }
            try clearDefault(session, except: id, at: at)
            try session.run(notifying("""
                UPDATE account SET is_default = true, updated_at = \(at.storedSeconds)
                WHERE tenant = \(settings.tenant) AND id = \(id) AND NOT is_default
                """))
        }
    }

    public func clearDefault(at: Date) throws {
        try write("clearing the default account") { session in try clearDefault(session, except: nil, at: at) }
    }

    /// Removes an account and its secrets (and its nonces, by cascade), returning what was removed.
    @discardableResult
    public func delete(id: UUID) throws -> AccountRecord {
        try write("deleting an account") { session in
            let rows = try session.run(notifying("DELETE FROM account WHERE tenant = \(settings.tenant) AND id = \(id)",
                                                 returning: Self.recordColumns)).rows
            guard let row = rows.first else { throw StoreError.unknownAccount(id) }
            return try Self.record(row)
        }
    }

    // MARK: - Helpers

    func updateMetadata(_ session: PostgresSessionHandle, _ record: AccountRecord) throws {
        if let conflict = try conflict(session, for: record, checkingID: false) { throw conflict }
        let count = Self.metadataColumns.count
        let assignments = Self.metadataColumns.enumerated().map { "\($1) = $\($0 + 1)" }.joined(separator: ", ")
        var binds = PostgresBindings(capacity: count + 3)
        try Self.metadataBinds(record, into: &binds)
        binds.append(settings.tenant)
        binds.append(record.id)
        let rows = try session.run(notifying(PostgresQuery(
            unsafeSQL: "UPDATE account SET \(assignments) WHERE tenant = $\(count + 1) AND id = $\(count + 2)", binds: binds))).rows
        guard rows.count == 1 else { throw StoreError.unknownAccount(record.id) }
    }

    /// Clears the tenant's default (but `id`'s). Default changes of one tenant take turns under
    /// a transaction-scoped advisory lock: a unique index is checked row by row, so two hosts
    /// each clearing then setting a different default would otherwise collide on
    /// `account_single_default` instead of the later one simply winning.
    func clearDefault(_ session: PostgresSessionHandle, except id: UUID?, at: Date) throws {
        try session.run("SELECT pg_advisory_xact_lock(hashtextextended(\(Self.defaultLockPrefix + settings.tenant), 0))")
        try session.run(notifying("""
            UPDATE account SET is_default = false, updated_at = \(at.storedSeconds)
            WHERE tenant = \(settings.tenant) AND is_default AND id IS DISTINCT FROM \(id)
            """))
    }

    /// `statement` (an INSERT, UPDATE or DELETE of accounts, without RETURNING) with every row it
    /// touches announced to the other hosts, in the same statement: the NOTIFY goes out when the
    /// transaction commits, and never without it. The rows come back with `columns`.
    func notifying(_ statement: PostgresQuery, returning columns: String = "id") -> PostgresQuery {
        var query = statement
        query.binds.append(notifyPrefix)
        query.sql = """
            WITH changed AS (\(statement.sql) RETURNING \(columns))
            SELECT changed.*, pg_notify('\(Self.channel)', $\(query.binds.count) || changed.id::text) FROM changed
            """
        return query
    }

    /// The store error explaining why `record` would break a uniqueness rule, if it would.
    func conflict(_ session: PostgresSessionHandle, for record: AccountRecord, checkingID: Bool = true) throws -> StoreError? {
        let rows = try session.run("""
            SELECT id FROM account WHERE tenant = \(settings.tenant) AND did = \(record.did) AND id <> \(record.id)
            """).rows
        if let existing = rows.first { return .duplicateDID(existing: try existing.decode(UUID.self)) }
        guard checkingID else { return nil }
        let taken = try session.run("SELECT 1 FROM account WHERE id = \(record.id)").rows
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
