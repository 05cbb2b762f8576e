import AccountStoreCore
import Foundation
import GRDB

extension SQLiteAccountStore {
    /// Adds a client signing key (sealed with the store key) in one durable write.
    /// - Throws: `.database` when the key id is taken.
    public func addClientKey(_ key: StoredClientKey) async throws(StoreError) {
        guard let sealed = sealer.seal(bytes: key.privateKey, additionalData: StoredClientKey.additionalData(keyID: key.keyID)) else {
            throw StoreError.database(context: "sealing an OAuth client key", reason: "AES-GCM failed")
        }
        try await performWrite("saving an OAuth client key") { db in
            try db.execute(sql: "INSERT INTO oauth_client_key (key_id, sealed_key, created_at) VALUES (?, ?, ?)",
                           arguments: [key.keyID, sealed, key.createdAt.storedSeconds])
        }
    }

    /// - Throws: `.clientKeyDoesNotOpen` for a key the store key cannot open.
    public func clientKeys() async throws(StoreError) -> [StoredClientKey] {
        let rows = try await performRead("reading OAuth client keys") { db in
            try Row.fetchAll(db, sql: "SELECT key_id, sealed_key, created_at FROM oauth_client_key ORDER BY created_at, key_id")
                .map { row -> (String, Data, Double) in (row["key_id"], row["sealed_key"], row["created_at"]) }
        }
        return try rows.map { (keyID, sealed, created) throws(StoreError) in
            guard let key = sealer.open(bytes: sealed, additionalData: StoredClientKey.additionalData(keyID: keyID)) else {
                throw StoreError.clientKeyDoesNotOpen(keyID: keyID)
            }
            return StoredClientKey(keyID: keyID, privateKey: key, createdAt: Date(storedSeconds: created))
        }
    }

    public func removeClientKey(_ keyID: String) async throws(StoreError) -> Bool {
        try await performWrite("removing an OAuth client key") { db in
            let inUse = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM account WHERE oauth_client_key_id = ?)",
                                          arguments: [keyID]) ?? false
            guard !inUse else { return false }
            try db.execute(sql: "DELETE FROM oauth_client_key WHERE key_id = ?", arguments: [keyID])
            return db.changesCount > 0
        }
    }

    public func clientKeyIDsInUse() async throws(StoreError) -> Set<String> {
        try await performRead("reading OAuth client key use") { db in
            Set(try String.fetchAll(db, sql: "SELECT DISTINCT oauth_client_key_id FROM account WHERE oauth_client_key_id IS NOT NULL"))
        }
    }
}
