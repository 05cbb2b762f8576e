import AccountStoreCore
import Foundation
import GRDB

extension SQLiteAccountStore {
    /// Registers many accounts in one transaction (all or nothing), e.g. for imports and
    /// benchmarks. Sealing happens before the transaction starts, so the writer is held only
    /// for the inserts.
    public func insert(contentsOf accounts: [(record: AccountRecord, secrets: AccountSecrets)]) async throws(StoreError) {
        var rows: [SealedAccountRow] = []
        rows.reserveCapacity(accounts.count)
        for account in accounts {
            rows.append(SealedAccountRow(record: account.record,
                                         sealedSecrets: try sealer.seal(account.secrets, account: account.record.id),
                                         metadataSeal: seal(account.record)))
        }
        try await performWrite("inserting accounts") { [self, rows] db in
            for row in rows {
                if row.record.isDefault {
                    try clearDefault(db, except: row.record.id, at: row.record.updatedAt)
                }
                do {
                    try row.insert(db)
                } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
                    if let conflict = try Self.conflict(db, for: row.record) { throw conflict }
                    throw error
                }
            }
        }
    }

    public func saveIdentity(_ record: AccountRecord) async throws(StoreError) {
        try await performWrite("saving an account's identity") { [self] db in
            // Merged into the row as it is now and sealed from it: `record` may be older than a
            // login stored meanwhile, whose auth kind and endpoints must not be sealed over.
            var stored = try currentRecord(db, id: record.id)
            guard !stored.isAltered else { throw StoreError.recordAltered(account: record.id) }
            stored.merge(identityOf: record)
            try db.execute(
                sql: "UPDATE account SET handle = ?, handle_verified = ?, pds = ?, metadata_seal = ?, updated_at = ? WHERE id = ?",
                arguments: [stored.handle, stored.handleVerified, stored.pds, seal(stored), stored.updatedAt.storedSeconds, record.id])
        }
    }

    /// Replaces an account's session in place (an upgrade to OAuth, or a new login of a known
    /// account): the session's columns and the sealed secrets, in ONE durable transaction. The
    /// id, creation date, default flag and profile stay. Nonces of the old session go.
    /// - Throws: `.unknownAccount`, or `.duplicateDID` when another account has the DID.
    public func replaceSession(_ record: AccountRecord, secrets: AccountSecrets) async throws(StoreError) -> Int64 {
        let sealed = try sealer.seal(secrets, account: record.id)
        return try await performWrite("replacing an account's session") { [self] db in
            let (isDefault, metadataSeal) = try sessionSeal(db, for: record)
            try Self.updateSession(db, record)
            // New tokens from a login: no refresh of the old ones is in flight any more.
            try db.execute(sql: """
                UPDATE account SET sealed_secrets = ?, metadata_seal = ?, is_default = ?, secrets_version = secrets_version + 1,
                    refresh_started_at = NULL, lease_owner = NULL, lease_expires_at = NULL WHERE id = ?
                """, arguments: [sealed, metadataSeal, isDefault, record.id])
            try db.execute(sql: "DELETE FROM dpop_nonce WHERE account_id = ?", arguments: [record.id])
            return try Int64.fetchOne(db, sql: "SELECT secrets_version FROM account WHERE id = ?", arguments: [record.id]) ?? 0
        }
    }

    /// Saves (or with nil, drops) an account's cached profile.
    public func setProfile(id: UUID, _ profile: AccountProfile?, at: Date) async throws(StoreError) {
        try await performWrite("saving an account's profile") { db in
            try db.execute(
                sql: """
                    UPDATE account SET profile_display_name = ?, profile_avatar = ?, profile_description = ?,
                    profile_fetched_at = ? WHERE id = ?
                    """,
                arguments: [profile?.displayName, profile?.avatar, profile?.description,
                            profile?.fetchedAt.storedSeconds, id])
            guard db.changesCount == 1 else { throw StoreError.unknownAccount(id) }
        }
    }

    public func setDefault(id: UUID, at: Date) async throws(StoreError) {
        try await performWrite("setting the default account") { [self] db in try makeDefault(db, id: id, at: at) }
    }

    public func clearDefault(at: Date) async throws(StoreError) {
        try await performWrite("clearing the default account") { [self] db in
            try clearDefault(db, except: nil, at: at)
        }
    }

    @discardableResult
    public func delete(id: UUID) async throws(StoreError) -> AccountRecord {
        try await performWrite("deleting an account") { db in
            guard let record = try Row.fetchOne(db, AccountRecord.filter(key: id)).map(self.verified) else {
                throw StoreError.unknownAccount(id)
            }
            try AccountRecord.deleteOne(db, key: id)
            return record
        }
    }

    // MARK: - Helpers

    /// The columns a new session writes: what the login decided, never the account's own
    /// (id, creation date, default flag, profile) nor the refresh bookkeeping.
    static let sessionColumns: [String] = AccountRecord.databaseSelection
        .compactMap { ($0 as? Column)?.name }
        .filter { !unwrittenBySessions.contains($0) }

    private static let unwrittenBySessions: Set<String> = [
        AccountColumn.id.name, AccountColumn.isDefault.name, AccountColumn.refreshStartedAt.name,
        AccountColumn.secretsVersion.name, AccountColumn.createdAt.name, AccountColumn.profileDisplayName.name,
        AccountColumn.profileAvatar.name, AccountColumn.profileDescription.name, AccountColumn.profileFetchedAt.name,
        AccountColumn.metadataSeal.name,
    ]

    /// Writes a new session's columns, mapping a missing row and a taken DID to their errors.
    static func updateSession(_ db: Database, _ record: AccountRecord) throws {
        do {
            try record.update(db, columns: sessionColumns)
        } catch is RecordError {
            throw StoreError.unknownAccount(record.id)
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            if let conflict = try Self.conflict(db, for: record) { throw conflict }
            throw error
        }
    }

    /// The store error explaining why `record` violates a uniqueness rule, if it is one.
    static func conflict(_ db: Database, for record: AccountRecord) throws -> StoreError? {
        if let existing = try UUID.fetchOne(
            db, sql: "SELECT id FROM account WHERE did = ? AND id != ?", arguments: [record.did, record.id])
        {
            return .duplicateDID(existing: existing)
        }
        if try AccountRecord.exists(db, key: record.id) {
            return .duplicateAccountID(record.id)
        }
        return nil
    }
}
