import Foundation
import GRDB

extension AccountStore {
    /// Registers many accounts in one transaction (all or nothing), e.g. for imports
    /// and benchmarks. Sealing happens before the transaction starts, so the writer
    /// is held only for the inserts; callers with very large batches may split them.
    /// - Throws: `StoreError.duplicateDID` for the first DID already registered
    ///   (or repeated within the batch); nothing is inserted then.
    public func insert(contentsOf accounts: [(record: AccountRecord, secrets: AccountSecrets)]) throws {
        let rows = try accounts.map { account in
            SealedAccountRow(
                record: account.record,
                sealedSecrets: try sealer.seal(account.secrets, account: account.record.id))
        }
        try performWrite("inserting accounts") { db in
            for row in rows {
                if row.record.isDefault {
                    try Self.clearDefault(db, except: row.record.id, at: row.record.updatedAt)
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

    public func saveIdentity(_ record: AccountRecord) throws {
        try performWrite("saving an account's identity") { db in
            try db.execute(
                sql: "UPDATE account SET handle = ?, handle_verified = ?, pds = ?, oauth_scope = ?, updated_at = ? WHERE id = ?",
                arguments: [record.handle, record.handleVerified, record.pds, record.oauth?.scope,
                            record.updatedAt.storedSeconds, record.id])
            guard db.changesCount == 1 else { throw StoreError.unknownAccount(record.id) }
        }
    }

    /// The columns a new session's metadata never writes: the key, the default flag, and the
    /// write-ahead mark (the new secrets' write clears it).
    static let unwrittenByMetadataUpdates: Set<String> = [
        AccountColumn.id.name, AccountColumn.isDefault.name, AccountColumn.refreshStartedAt.name,
        AccountColumn.secretsVersion.name,
    ]

    /// Writes every column but the id, `isDefault` and the mark, mapping a missing row and a taken DID or
    /// handle to their `StoreError`s.
    static func updateMetadata(_ db: Database, _ record: AccountRecord) throws {
        let columns = AccountRecord.databaseSelection
            .compactMap { ($0 as? Column)?.name }
            .filter { !unwrittenByMetadataUpdates.contains($0) }
        do {
            try record.update(db, columns: columns)
        } catch is RecordError {
            throw StoreError.unknownAccount(record.id)
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            if let conflict = try Self.conflict(db, for: record) { throw conflict }
            throw error
        }
    }

    /// Makes this account the default and every other one not, in one transaction.
    public func setDefault(id: UUID, at: Date) throws {
        try performWrite("setting the default account") { db in
            guard try AccountRecord.exists(db, key: id) else { throw StoreError.unknownAccount(id) }
            try Self.clearDefault(db, except: id, at: at)
            try db.execute(
                sql: "UPDATE account SET is_default = 1, updated_at = ? WHERE id = ? AND is_default = 0",
                arguments: [at.storedSeconds, id])
        }
    }

    /// Leaves no account as the default.
    public func clearDefault(at: Date) throws {
        try performWrite("clearing the default account") { db in
            try Self.clearDefault(db, except: nil, at: at)
        }
    }

    /// Removes an account and its secrets, returning what was removed.
    ///
    /// Deleting the default account leaves NO default: picking another account
    /// silently could send a client's calls as the wrong identity.
    @discardableResult
    public func delete(id: UUID) throws -> AccountRecord {
        try performWrite("deleting an account") { db in
            guard let record = try AccountRecord.fetchOne(db, key: id) else {
                throw StoreError.unknownAccount(id)
            }
            try AccountRecord.deleteOne(db, key: id)
            return record
        }
    }

    // MARK: - Helpers

    static func clearDefault(_ db: Database, except id: UUID?, at: Date) throws {
        try db.execute(
            sql: "UPDATE account SET is_default = 0, updated_at = ? WHERE is_default = 1 AND id IS NOT ?",
            arguments: [at.storedSeconds, id])
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
