import AccountStoreCore
import Foundation
import PostgresNIO

extension PostgresAccountStore {
    /// Saves the latest nonces (insert or replace per account and origin); nonces of accounts
    /// deleted meanwhile, or of another tenant, are skipped.
    public func saveDPoPNonces(_ nonces: [StoredDPoPNonce]) async throws(StoreError) {
        guard !nonces.isEmpty else { return }
        let tenant = settings.tenant
        // One statement: two hosts saving the same pairs lock them in the same order, so neither
        // waits on the other in a cycle.
        // One row per pair (an upsert may not touch a row twice), in key order.
        let sorted = StoredDPoPNonce.newestPerOrigin(nonces)
        let (accounts, origins) = (sorted.map(\.account), sorted.map(\.origin))
        let (values, dates) = (sorted.map(\.nonce), sorted.map(\.receivedAt.storedSeconds))
        // Committed alone: one round trip, not three.
        try await writeAlone("saving DPoP nonces") { session in
            try await session.run("""
                INSERT INTO dpop_nonce (account_id, origin, nonce, received_at)
                SELECT n.account_id, n.origin, n.nonce, n.received_at
                FROM unnest(\(accounts)::uuid[], \(origins)::text[], \(values)::text[], \(dates)::double precision[])
                    WITH ORDINALITY AS n (account_id, origin, nonce, received_at, position)
                WHERE EXISTS (SELECT 1 FROM account WHERE tenant = \(tenant) AND id = n.account_id)
                ORDER BY n.position
                ON CONFLICT (account_id, origin) DO UPDATE SET nonce = excluded.nonce, received_at = excluded.received_at
                """)
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
