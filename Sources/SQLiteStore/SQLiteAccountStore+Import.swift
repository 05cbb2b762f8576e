import AccountStoreCore
import Crypto
import Foundation
import GRDB
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// A registry copied into a SQLite store (`blueskyd store copy`), made whole or not at all.
///
/// The copy is built beside the target, in a private directory of its own, and moved over the
/// target's database file with one `rename` once it is complete and on disk: a copy killed at
/// any point leaves the target as it was (a directory left behind is removed by the next copy).
/// The target must hold no account: a copy never merges into a registry in use.
extension SQLiteAccountStore {
    /// Where copies are built inside a state directory, before they are moved in place.
    static let copyDirectoryPrefix = ".copy-"

    /// Copies into the SQLite store of `directory`: `extras` (client keys, nonces) and what
    /// `produce` writes, sealed with `key`. The caller holds the directory's instance lock.
    /// Returns the target database's path.
    /// - Parameter replacing: the store of `directory` itself, open, which `produce` reads
    ///   (`store rekey`): once the copy is built, its log is folded in and it is closed, and the
    ///   copy moved over it. Otherwise the store there must hold nothing.
    /// - Parameter beforeMove: the last step before the copy is moved in (the key it opens
    ///   with put beside it: as late as can be, so that a kill leaves the directory as it was).
    /// - Throws: `.targetNotEmpty` when the store there holds accounts or client keys (not replacing).
    public static func importRegistry(into directory: URL, key: SymmetricKey, logger: Logger, extras: RegistryExtras,
                                      replacing: SQLiteAccountStore? = nil,
                                      beforeMove: () throws(StoreError) -> Void = {},
                                      _ produce: @Sendable (any RegistryWriter) async throws(StoreError) -> Void)
        async throws(StoreError) -> String {
        let target = directory.appendingPathComponent(databaseFileName).path
        try removeAbandonedCopies(in: directory)
        if replacing == nil, FileManager.default.fileExists(atPath: target) {
            // Opened to count, its log folded into it and emptied, then closed: no frame of the
            // old file's log is left to be read against the new one.
            let existing = try SQLiteAccountStore(directory: directory, key: key, logger: logger)
            let held: Int
            do {
                held = try await existing.count() + existing.clientKeys().count
                try await existing.foldLog()
            } catch {
                await existing.close()
                throw error
            }
            await existing.close()
            guard held == 0 else { throw StoreError.targetNotEmpty(location: target, accounts: held) }
        }
        if replacing == nil { try removeEmptyLog(of: target) }
        let building = directory.appendingPathComponent(copyDirectoryPrefix + UUID().uuidString.lowercased())
        do throws(StoreError) {
            let copy = try SQLiteAccountStore(directory: building, key: key, logger: logger)
            do throws(StoreError) {
                for clientKey in extras.clientKeys { try await copy.addClientKey(clientKey) }
                try await produce(CopyWriter(store: copy))
                try await copy.saveDPoPNonces(extras.nonces)
                // Everything in the database file itself: only that file is moved in.
                try await copy.foldLog()
            } catch {
                await copy.close()
                throw error
            }
            await copy.close()
            let built = building.appendingPathComponent(databaseFileName).path
            try removeEmptyLog(of: built)
            try syncFile(built)
            if let replacing {
                try await replacing.foldLog()
                await replacing.close()
                try removeEmptyLog(of: target)
            }
            try beforeMove()
            guard rename(built, target) == 0 else {
                throw StoreError.database(context: "copying into \(target)", reason: "rename: \(String(cString: strerror(errno)))")
            }
            PrivateFiles.syncDirectory(directory.path)
        } catch {
            try? FileManager.default.removeItem(at: building)
            throw error
        }
        try? FileManager.default.removeItem(at: building)
        return target
    }

    /// Rows of a copy, every column as the source had it (the tokens' version, the write-ahead
    /// mark, the default flag, the profile), sealed under this store's key.
    func importRows(_ accounts: [PortableAccount]) async throws(StoreError) {
        var rows: [SealedAccountRow] = []
        rows.reserveCapacity(accounts.count)
        for account in accounts {
            rows.append(SealedAccountRow(record: account.record,
                                         sealedSecrets: try sealer.seal(account.secrets, account: account.record.id),
                                         metadataSeal: seal(account.record)))
        }
        try await performWrite("copying accounts") { [rows] db in
            for row in rows {
                do {
                    try row.insert(db)
                } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
                    if let conflict = try Self.conflict(db, for: row.record) { throw conflict }
                    throw error
                }
            }
        }
    }

    /// Removes what a killed copy left behind: only this process copies while it holds the lock.
    private static func removeAbandonedCopies(in directory: URL) throws(StoreError) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        for name in names where name.hasPrefix(copyDirectoryPrefix) {
            do {
                try FileManager.default.removeItem(at: directory.appendingPathComponent(name))
            } catch {
                throw StoreError.directory(path: directory.appendingPathComponent(name).path, reason: "\(error)")
            }
        }
    }

    /// Writes every frame of the log into the database and empties the log (outside any
    /// transaction: a checkpoint cannot run inside one).
    func foldLog() async throws(StoreError) {
        do {
            let (busy, _, _) = try await pool.writeWithoutTransaction { db in
                try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)").map { row -> (Int, Int, Int) in (row[0], row[1], row[2]) }
                    ?? (1, 0, 0)
            }
            guard busy == 0 else { throw StoreError.database(context: "folding the log of \(databasePath) in", reason: "the store is busy") }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError.database(context: "folding the log of \(databasePath) in", reason: "\(error)")
        }
    }

    /// Removes the log beside `database` when it holds no frame (what a folded, closed store
    /// leaves); refuses one that does: it is another process's, or the log of a database
    /// someone removed, and SQLite would read its frames into the new file.
    private static func removeEmptyLog(of database: String) throws(StoreError) {
        let log = database + "-wal"
        if let size = (try? FileManager.default.attributesOfItem(atPath: log))?[.size] as? NSNumber {
            guard size.intValue == 0 else {
                throw StoreError.database(context: "copying into \(database)",
                                          reason: "\(log) holds a log: is another process using the store? If not, remove it")
            }
            unlink(log)
        }
        unlink(database + "-shm")
    }

    private static func syncFile(_ path: String) throws(StoreError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0, fsync(fd) == 0 else {
            let reason = String(cString: strerror(errno))
            if fd >= 0 { Glibc.close(fd) }
            throw StoreError.database(context: "copying into \(path)", reason: "fsync: \(reason)")
        }
        Glibc.close(fd)
    }
}

/// Hands a copy's batches to the store being built.
private struct CopyWriter: RegistryWriter {
    let store: SQLiteAccountStore
    func write(_ accounts: [PortableAccount]) async throws(StoreError) { try await store.importRows(accounts) }
}
