import AccountStoreCore
import Foundation
import GRDB

extension SQLiteAccountStore {
    public func saveDPoPNonces(_ nonces: [StoredDPoPNonce]) async throws(StoreError) {
        guard !nonces.isEmpty else { return }
        try await performWrite("saving DPoP nonces") { db in
            for entry in StoredDPoPNonce.newestPerOrigin(nonces) {
                try db.execute(
                    sql: """
                        INSERT INTO dpop_nonce (account_id, origin, nonce, received_at)
                        SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM account WHERE id = ?)
                        ON CONFLICT (account_id, origin) DO UPDATE SET nonce = excluded.nonce, received_at = excluded.received_at
                        """,
                    arguments: [entry.account, entry.origin, entry.nonce, entry.receivedAt.storedSeconds, entry.account])
            }
        }
    }

    /// Every persisted nonce (to warm the cache at startup), by account then origin.
    public func allDPoPNonces() async throws(StoreError) -> [StoredDPoPNonce] {
        try await performRead("reading DPoP nonces") { db in
            try Row.fetchAll(db, sql: "SELECT account_id, origin, nonce, received_at FROM dpop_nonce ORDER BY account_id, origin")
                .map { row in
                    StoredDPoPNonce(account: row["account_id"], origin: row["origin"], nonce: row["nonce"],
                                    receivedAt: Date(storedSeconds: row["received_at"]))
                }
        }
    }
}
