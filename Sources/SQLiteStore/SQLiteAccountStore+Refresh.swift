import AccountStoreCore
import Foundation
import GRDB

extension SQLiteAccountStore {
    /// Takes the refresh lease: the durable write-ahead mark, set before the request is sent.
    /// Found set at startup, it means the daemon died mid-refresh and the refresh token may be spent.
    public func claimRefresh(id: UUID, expecting version: Int64, at now: Date) async throws(StoreError) -> RefreshClaim {
        let (me, until) = (leaseOwner, now.addingTimeInterval(leaseDuration))
        return try await performWrite("marking a refresh as started") { db in
            guard let row = try Row.fetchOne(
                db, sql: "SELECT secrets_version, lease_owner, lease_expires_at, refresh_started_at FROM account WHERE id = ?",
                arguments: [id])
            else { throw StoreError.unknownAccount(id) }
            let leaseEnds = (row["lease_expires_at"] as Double?).map(Date.init(storedSeconds:))
            if let verdict = RefreshClaim.decide(storedVersion: row["secrets_version"], expected: version, owner: row["lease_owner"],
                                                 leaseEnds: leaseEnds, me: me, now: now) {
                return verdict
            }
            let interrupted: Double? = row["refresh_started_at"]
            try db.execute(
                sql: """
                    UPDATE account SET refresh_started_at = ?, lease_owner = ?, lease_expires_at = ?, updated_at = ?
                    WHERE id = ?
                    """,
                arguments: [now.storedSeconds, me, until.storedSeconds, now.storedSeconds, id])
            return .granted(interruptedAt: interrupted.map(Date.init(storedSeconds:)))
        }
    }

    /// Stores the result of a successful token refresh in ONE durable transaction: the new
    /// secrets, expiries and refresh time; clears the lease, the write-ahead mark and any failure
    /// state. The writer runs with `synchronous = FULL`, so when this returns the rotated tokens
    /// are on disk: only then may the daemon use them.
    public func saveRefreshedSession(
        id: UUID, secrets: AccountSecrets, accessExpiresAt: Date?, refreshExpiresAt: Date?,
        scope: String?, handle: String?, at: Date, replacing version: Int64
    ) async throws(StoreError) -> Int64 {
        let sealed = try sealer.seal(secrets, account: id)
        return try await performWrite("saving a refreshed session") { [self] db in
            // A rename changes a sealed column: sealed anew from the row, over a seal that held.
            let renamed = try handle.map { handle throws -> Data in
                guard let seal = try renamedSeal(db, id: id, handle: handle, version: version) else {
                    throw StoreError.fencedWriteMissed(id, accountExists: try AccountRecord.exists(db, key: id))
                }
                return seal
            }
            try db.execute(
                sql: """
                    UPDATE account SET
                        sealed_secrets = ?, secrets_version = secrets_version + 1,
                        access_expires_at = ?, refresh_expires_at = ?, last_refresh_at = ?,
                        refresh_started_at = NULL, lease_owner = NULL, lease_expires_at = NULL,
                        state = ?, state_reason = NULL, updated_at = ?,
                        oauth_scope = COALESCE(?, oauth_scope),
                        handle_verified = CASE WHEN ? IS NULL THEN handle_verified ELSE 0 END, handle = COALESCE(?, handle),
                        metadata_seal = COALESCE(?, metadata_seal)
                    WHERE id = ? AND secrets_version = ?
                    """,
                arguments: [
                    sealed, accessExpiresAt?.storedSeconds, refreshExpiresAt?.storedSeconds, at.storedSeconds,
                    AccountState.active.rawValue, at.storedSeconds, scope, handle, handle, renamed, id, version,
                ])
            guard db.changesCount == 1 else {
                throw StoreError.fencedWriteMissed(id, accountExists: try AccountRecord.exists(db, key: id))
            }
            return version + 1
        }
    }

    public func markState(id: UUID, state: AccountState, reason: String?, at: Date, lease: LeaseRelease,
                          ifVersion version: Int64?) async throws(StoreError) {
        try await performWrite("changing an account's state") { db in
            let release = switch lease {
            case .keep: ""
            case .release: ", refresh_started_at = NULL, lease_owner = NULL, lease_expires_at = NULL"
            case .releaseKeepingMark: ", lease_owner = NULL, lease_expires_at = NULL"
            }
            try db.execute(
                sql: "UPDATE account SET state = ?, state_reason = ?, updated_at = ?\(release) WHERE id = ? AND (? IS NULL OR secrets_version = ?)",
                arguments: [state.rawValue, reason, at.storedSeconds, id, version, version])
            guard db.changesCount == 1 else {
                throw StoreError.fencedWriteMissed(id, accountExists: try AccountRecord.exists(db, key: id))
            }
        }
    }
}
