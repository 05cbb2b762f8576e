import AccountStoreCore
import Foundation
import GRDB

/// Writes of the columns a seal covers (the default flag, the handle): each reads the row as it
/// is inside the write, and seals what it writes only over a seal that held. A row someone
/// changed without the key is never sealed by a write that merely touched it.
extension SQLiteAccountStore {
    /// The row of `id` as it is now, checked against its seal.
    func currentRecord(_ db: Database, id: UUID) throws -> AccountRecord {
        guard let row = try Row.fetchOne(db, AccountRecord.filter(key: id)) else { throw StoreError.unknownAccount(id) }
        return try verified(row)
    }

    /// Clears the default flag of every row but `id`'s. A cleared row whose seal held is sealed
    /// without the flag; one whose seal failed keeps failing.
    func clearDefault(_ db: Database, except id: UUID?, at: Date) throws {
        let rows = try Row.fetchAll(db, AccountRecord.filter(AccountColumn.isDefault == true && AccountColumn.id != id))
        for row in rows {
            var record = try verified(row)
            let resealed = record.sealCheck == .holds
            record.isDefault = false
            try db.execute(sql: "UPDATE account SET is_default = 0, metadata_seal = ?, updated_at = ? WHERE id = ?",
                           arguments: [resealed ? seal(record) : row[AccountColumn.metadataSeal], at.storedSeconds, record.id])
        }
    }

    /// Makes `id` the default, sealed with the flag; refused for a row whose seal fails.
    func makeDefault(_ db: Database, id: UUID, at: Date) throws {
        var record = try currentRecord(db, id: id)
        guard record.sealCheck == .holds else { throw StoreError.recordAltered(account: id) }
        try clearDefault(db, except: id, at: at)
        guard !record.isDefault else { return }
        record.isDefault = true
        try db.execute(sql: "UPDATE account SET is_default = 1, metadata_seal = ?, updated_at = ? WHERE id = ?",
                       arguments: [seal(record), at.storedSeconds, id])
    }

    /// The seal of a new session's `record` over the row's own default flag (a login never
    /// decides it): the flag kept when the row's seal held, else cleared (a new login mends the
    /// row, not a default someone else set). Returns the flag with the seal.
    func sessionSeal(_ db: Database, for record: AccountRecord) throws -> (isDefault: Bool, seal: Data) {
        let stored = try currentRecord(db, id: record.id)
        var sealed = record
        sealed.isDefault = stored.sealCheck == .holds && stored.isDefault
        return (sealed.isDefault, seal(sealed))
    }

    /// The seal of the row after a refresh renamed it (the new handle not yet verified), or nil
    /// when the row is gone or its tokens moved past `version`; refused for a row whose seal
    /// fails, before anything is written.
    func renamedSeal(_ db: Database, id: UUID, handle: String, version: Int64) throws -> Data? {
        guard let row = try Row.fetchOne(db, AccountRecord.filter(key: id)) else { return nil }
        var record = try verified(row)
        guard record.secretsVersion == version else { return nil }
        guard record.sealCheck == .holds else { throw StoreError.recordAltered(account: id) }
        record.handle = handle
        record.handleVerified = false
        return seal(record)
    }
}
