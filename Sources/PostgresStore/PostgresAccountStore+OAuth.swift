import AccountStoreCore
import Foundation
import PostgresNIO

extension PostgresAccountStore {
    /// Saves the latest nonces (insert or replace per account and origin); nonces of accounts
    /// deleted meanwhile, or of another tenant, are skipped.
    public func saveDPoPNonces(_ nonces: [StoredDPoPNonce]) async throws(StoreError) {
        guard !nonces.isEmpty else { return }
        let tenant = settings.tenant
        try await write("saving DPoP nonces") { session in
            for entry in nonces {
                try await session.run("""
                    INSERT INTO dpop_nonce (account_id, origin, nonce, received_at)
                    SELECT \(entry.account), \(entry.origin), \(entry.nonce), \(entry.receivedAt.storedSeconds)
                    WHERE EXISTS (SELECT 1 FROM account WHERE tenant = \(tenant) AND id = \(entry.account))
                    ON CONFLICT (account_id, origin) DO UPDATE SET nonce = excluded.nonce, received_at = excluded.received_at
                    """)
            }
        }
    }

    public func allDPoPNonces() async throws(StoreError) -> [StoredDPoPNonce] {
        let tenant = settings.tenant
        return try await read("reading DPoP nonces") { session in
            try await session.run("""
                SELECT n.account_id, n.origin, n.nonce, n.received_at FROM dpop_nonce n
                JOIN account a ON a.id = n.account_id WHERE a.tenant = \(tenant) ORDER BY n.account_id, n.origin
                """).map { row in
                let (account, origin, nonce, received) = try row.decode((UUID, String, String, Double).self)
                return StoredDPoPNonce(account: account, origin: origin, nonce: nonce, receivedAt: Date(storedSeconds: received))
            }
        }
    }
}
