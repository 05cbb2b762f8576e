import AccountStoreCore
import Foundation
import PostgresNIO

extension PostgresAccountStore {
    /// Adds a client signing key of the tenant (sealed with the store key), for every host.
    public func addClientKey(_ key: StoredClientKey) async throws(StoreError) {
        let sealer = sealer
        guard let sealed = sealer.seal(bytes: key.privateKey, additionalData: StoredClientKey.additionalData(keyID: key.keyID)) else {
            throw StoreError.database(context: "sealing an OAuth client key", reason: "AES-GCM failed")
        }
        let (tenant, by) = (settings.tenant, sealer.writingFingerprint)
        try await write("saving an OAuth client key") { session in
            try await session.run("""
                INSERT INTO oauth_client_key (tenant, key_id, sealed_key, sealed_by, created_at)
                VALUES (\(tenant), \(key.keyID), \(ByteBuffer(bytes: sealed)), \(by), \(key.createdAt.storedSeconds))
                """)
        }
    }

    public func clientKeys() async throws(StoreError) -> [StoredClientKey] {
        let tenant = settings.tenant
        let rows = try await read("reading OAuth client keys") { session in
            try await session.run("""
                SELECT key_id, sealed_key, created_at FROM oauth_client_key WHERE tenant = \(tenant)
                ORDER BY created_at, key_id
                """).map { try $0.decode((String, ByteBuffer, Double).self) }
        }
        return try rows.map { (keyID, sealed, created) throws(StoreError) in
            guard let key = sealer.open(bytes: Data(buffer: sealed), additionalData: StoredClientKey.additionalData(keyID: keyID)) else {
                throw StoreError.clientKeyDoesNotOpen(keyID: keyID)
            }
            return StoredClientKey(keyID: keyID, privateKey: key, createdAt: Date(storedSeconds: created))
        }
    }

    /// Removes a client key no session of the tenant uses; false when one still does (or it is unknown).
    public func removeClientKey(_ keyID: String) async throws(StoreError) -> Bool {
        let tenant = settings.tenant
        return try await write("removing an OAuth client key") { session in
            let inUse = try await session.run("""
                SELECT 1 FROM account WHERE tenant = \(tenant) AND oauth_client_key_id = \(keyID) LIMIT 1
                """)
            guard inUse.isEmpty else { return false }
            let removed = try await session.run("""
                DELETE FROM oauth_client_key WHERE tenant = \(tenant) AND key_id = \(keyID) RETURNING key_id
                """)
            return !removed.isEmpty
        }
    }

    public func clientKeyIDsInUse() async throws(StoreError) -> Set<String> {
        let tenant = settings.tenant
        return try await read("reading OAuth client key use") { session in
            Set(try await session.run("""
                SELECT DISTINCT oauth_client_key_id FROM account
                WHERE tenant = \(tenant) AND oauth_client_key_id IS NOT NULL
                """).map { try $0.decode(String.self) })
        }
    }
}
