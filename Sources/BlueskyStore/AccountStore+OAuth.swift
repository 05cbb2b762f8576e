import Foundation
import GRDB

extension AccountStore {
    /// Replaces an account's session in place (an upgrade to OAuth, or a new login of a known
    /// account): every metadata column but `isDefault`, and the sealed secrets, in ONE durable
    /// transaction. The id stays, and so does the default flag. Nonces of the old session go.
    /// - Throws: `StoreError.unknownAccount`, or `duplicateDID` when another account has the DID.
    @discardableResult
    public func replaceSession(_ record: AccountRecord, secrets: AccountSecrets) throws -> Int64 {
        let sealed = try sealer.seal(secrets, account: record.id)
        return try performWrite("replacing an account's session") { db in
            try Self.updateMetadata(db, record)
            // New tokens from a login: no refresh of the old ones is in flight any more.
            try db.execute(sql: """
                UPDATE account SET sealed_secrets = ?, secrets_version = secrets_version + 1,
                    refresh_started_at = NULL, lease_owner = NULL, lease_expires_at = NULL WHERE id = ?
                """,
                           arguments: [sealed, record.id])
            try db.execute(sql: "DELETE FROM dpop_nonce WHERE account_id = ?", arguments: [record.id])
            return try Int64.fetchOne(db, sql: "SELECT secrets_version FROM account WHERE id = ?", arguments: [record.id]) ?? 0
        }
    }

    /// Saves the latest nonces (insert or replace per account and origin). Nonces of accounts
    /// deleted meanwhile are skipped.
    public func saveDPoPNonces(_ nonces: [StoredDPoPNonce]) throws {
        guard !nonces.isEmpty else { return }
        try performWrite("saving DPoP nonces") { db in
            for entry in nonces {
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
    public func allDPoPNonces() throws -> [StoredDPoPNonce] {
        try performRead("reading DPoP nonces") { db in
            try Row.fetchAll(db, sql: "SELECT account_id, origin, nonce, received_at FROM dpop_nonce ORDER BY account_id, origin")
                .map { row in
                    StoredDPoPNonce(account: row["account_id"], origin: row["origin"], nonce: row["nonce"],
                                    receivedAt: Date(storedSeconds: row["received_at"]))
                }
        }
    }
}
