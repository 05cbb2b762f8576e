import Foundation
import GRDB

/// A confidential OAuth client's signing key as stored: its `kid` and raw P-256 private scalar.
public struct StoredClientKey: Sendable, Equatable {
    public var keyID: String
    /// The 32-byte private scalar. Sealed at rest; never logged.
    public var privateKey: Data
    public var createdAt: Date

    public init(keyID: String, privateKey: Data, createdAt: Date) {
        self.keyID = keyID
        self.privateKey = privateKey
        self.createdAt = createdAt
    }
}

extension StoredClientKey: CustomStringConvertible, CustomDebugStringConvertible {
    public var description: String { "StoredClientKey(kid: \(keyID), private part redacted)" }
    public var debugDescription: String { description }
}

extension AccountStore {
    /// Sealed client keys carry their own purpose label, so neither an account's blob nor another
    /// key's can be passed off as this one.
    package static func clientKeyAdditionalData(keyID: String) -> Data {
        Data("blueskyd/oauth-client-key/v1/".utf8) + Data(keyID.utf8)
    }

    /// Adds a client signing key (sealed with the store key) in one durable write.
    /// - Throws: `StoreError.database` when the key id is taken.
    public func addClientKey(_ key: StoredClientKey) throws {
        guard let sealed = sealer.seal(bytes: key.privateKey, additionalData: Self.clientKeyAdditionalData(keyID: key.keyID)) else {
            throw StoreError.database(context: "sealing an OAuth client key", reason: "AES-GCM failed")
        }
        try performWrite("saving an OAuth client key") { db in
            try db.execute(sql: "INSERT INTO oauth_client_key (key_id, sealed_key, created_at) VALUES (?, ?, ?)",
                           arguments: [key.keyID, sealed, key.createdAt.storedSeconds])
        }
    }

    /// Every client signing key, oldest first.
    /// - Throws: `StoreError.clientKeyDoesNotOpen` for a key the store key cannot open.
    public func clientKeys() throws -> [StoredClientKey] {
        let rows = try performRead("reading OAuth client keys") { db in
            try Row.fetchAll(db, sql: "SELECT key_id, sealed_key, created_at FROM oauth_client_key ORDER BY created_at, key_id")
        }
        return try rows.map { row in
            let keyID: String = row["key_id"]
            guard let key = sealer.open(bytes: row["sealed_key"], additionalData: Self.clientKeyAdditionalData(keyID: keyID)) else {
                throw StoreError.clientKeyDoesNotOpen(keyID: keyID)
            }
            return StoredClientKey(keyID: keyID, privateKey: key, createdAt: Date(storedSeconds: row["created_at"]))
        }
    }

    /// Removes a client key no session uses any more; false when a session still does (or it is unknown).
    public func removeClientKey(_ keyID: String) throws -> Bool {
        try performWrite("removing an OAuth client key") { db in
            let inUse = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM account WHERE oauth_client_key_id = ?)",
                                          arguments: [keyID]) ?? false
            guard !inUse else { return false }
            try db.execute(sql: "DELETE FROM oauth_client_key WHERE key_id = ?", arguments: [keyID])
            return db.changesCount > 0
        }
    }

    /// The ids of the client keys that sessions are bound to.
    public func clientKeyIDsInUse() throws -> Set<String> {
        try performRead("reading OAuth client key use") { db in
            Set(try String.fetchAll(db, sql: "SELECT DISTINCT oauth_client_key_id FROM account WHERE oauth_client_key_id IS NOT NULL"))
        }
    }
}
