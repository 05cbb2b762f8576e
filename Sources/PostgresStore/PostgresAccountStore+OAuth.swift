import BlueskyStore
import Foundation
import PostgresNIO

extension PostgresAccountStore {
    /// Saves the latest nonces (insert or replace per account and origin); nonces of accounts
    /// deleted meanwhile are skipped.
    public func saveDPoPNonces(_ nonces: [StoredDPoPNonce]) throws {
        guard !nonces.isEmpty else { return }
        try write("saving DPoP nonces") { session in
            for entry in nonces {
                try session.run("""
                    INSERT INTO dpop_nonce (account_id, origin, nonce, received_at)
                    SELECT \(entry.account), \(entry.origin), \(entry.nonce), \(entry.receivedAt.storedSeconds)
                    WHERE EXISTS (SELECT 1 FROM account WHERE tenant = \(settings.tenant) AND id = \(entry.account))
                    ON CONFLICT (account_id, origin) DO UPDATE SET nonce = excluded.nonce, received_at = excluded.received_at
                    """)
            }
        }
    }

    public func allDPoPNonces() throws -> [StoredDPoPNonce] {
        try read("reading DPoP nonces") { session in
            try session.run("""
                SELECT n.account_id, n.origin, n.nonce, n.received_at FROM dpop_nonce n
                JOIN account a ON a.id = n.account_id WHERE a.tenant = \(settings.tenant) ORDER BY n.account_id, n.origin
                """).rows.map { row in
                let (account, origin, nonce, received) = try row.decode((UUID, String, String, Double).self)
                return StoredDPoPNonce(account: account, origin: origin, nonce: nonce, receivedAt: Date(storedSeconds: received))
            }
        }
    }

    /// Adds a client signing key of the tenant (sealed with the store key), for every host.
    public func addClientKey(_ key: StoredClientKey) throws {
        guard let sealed = sealer.seal(bytes: key.privateKey,
                                       additionalData: AccountStore.clientKeyAdditionalData(keyID: key.keyID)) else {
            throw StoreError.database(context: "sealing an OAuth client key", reason: "AES-GCM failed")
        }
        _ = try write("saving an OAuth client key") { session in
            try session.run("""
                INSERT INTO oauth_client_key (tenant, key_id, sealed_key, created_at)
                VALUES (\(settings.tenant), \(key.keyID), \(ByteBuffer(bytes: sealed)), \(key.createdAt.storedSeconds))
                """)
        }
    }

    public func clientKeys() throws -> [StoredClientKey] {
        let rows = try read("reading OAuth client keys") { session in
            try session.run("""
                SELECT key_id, sealed_key, created_at FROM oauth_client_key WHERE tenant = \(settings.tenant)
                ORDER BY created_at, key_id
                """).rows.map { try $0.decode((String, ByteBuffer, Double).self) }
        }
        return try rows.map { keyID, sealed, created in
            guard let key = sealer.open(bytes: Data(buffer: sealed),
                                        additionalData: AccountStore.clientKeyAdditionalData(keyID: keyID)) else {
                throw StoreError.clientKeyDoesNotOpen(keyID: keyID)
            }
            return StoredClientKey(keyID: keyID, privateKey: key, createdAt: Date(storedSeconds: created))
        }
    }

    /// Removes a client key no session of the tenant uses; false when one still does (or it is unknown).
    public func removeClientKey(_ keyID: String) throws -> Bool {
        try write("removing an OAuth client key") { session in
            let inUse = try session.run("""
                SELECT 1 FROM account WHERE tenant = \(settings.tenant) AND oauth_client_key_id = \(keyID) LIMIT 1
                """).rows
            guard inUse.isEmpty else { return false }
            let removed = try session.run("""
                DELETE FROM oauth_client_key WHERE tenant = \(settings.tenant) AND key_id = \(keyID) RETURNING key_id
                """).rows
            return !removed.isEmpty
        }
    }

    public func clientKeyIDsInUse() throws -> Set<String> {
        try read("reading OAuth client key use") { session in
            Set(try session.run("""
                SELECT DISTINCT oauth_client_key_id FROM account
                WHERE tenant = \(settings.tenant) AND oauth_client_key_id IS NOT NULL
                """).rows.map { try $0.decode(String.self) })
        }
    }
}
