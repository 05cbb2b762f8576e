import Foundation
import GRDB

extension AccountStore {
    /// The lease owner of a single-host store: the instance lock on the state directory already
    /// makes this process the only writer, so a restarted daemon takes its own mark back at once.
    public static let localLeaseOwner = "local"

    /// Takes the refresh lease: the durable write-ahead mark, set before the request is sent.
    /// Found set at startup, it means the daemon died mid-refresh and the refresh token may be spent.
    public func claimRefresh(id: UUID, expecting version: Int64, at now: Date) throws -> RefreshClaim {
        try performWrite("marking a refresh as started") { db in
            guard let row = try Row.fetchOne(
                db, sql: "SELECT secrets_version, lease_owner, lease_expires_at, refresh_started_at FROM account WHERE id = ?",
                arguments: [id])
            else { throw StoreError.unknownAccount(id) }
            let current: Int64 = row["secrets_version"]
            guard current == version else { return .superseded(version: current) }
            let owner: String? = row["lease_owner"]
            let until: Double? = row["lease_expires_at"]
            if let owner, owner != leaseOwner, let until, until > now.storedSeconds {
                return .held(by: owner, until: Date(storedSeconds: until))
            }
            let interrupted: Double? = row["refresh_started_at"]
            try db.execute(
                sql: """
                    UPDATE account SET refresh_started_at = ?, lease_owner = ?, lease_expires_at = ?, updated_at = ?
                    WHERE id = ?
                    """,
                arguments: [now.storedSeconds, leaseOwner, now.addingTimeInterval(leaseDuration).storedSeconds,
                            now.storedSeconds, id])
            return .granted(interruptedAt: interrupted.map(Date.init(storedSeconds:)))
        }
    }

    /// Stores the result of a successful token refresh in ONE durable transaction: the new
    /// secrets, expiries and refresh time; clears the lease, the write-ahead mark and any failure
    /// state. The writer runs with `synchronous = FULL`, so when this returns the rotated tokens
    /// are on disk: only then may the daemon use them.
    public func saveRefreshedSession(
        id: UUID, secrets: AccountSecrets, accessExpiresAt: Date?, refreshExpiresAt: Date?,
        at: Date, replacing version: Int64
    ) throws -> Int64 {
        let sealed = try sealer.seal(secrets, account: id)
        return try performWrite("saving a refreshed session") { db in
            try db.execute(
                sql: """
                    UPDATE account SET
                        sealed_secrets = ?, secrets_version = secrets_version + 1,
                        access_expires_at = ?, refresh_expires_at = ?, last_refresh_at = ?,
                        refresh_started_at = NULL, lease_owner = NULL, lease_expires_at = NULL,
                        state = ?, state_reason = NULL, updated_at = ?
                    WHERE id = ? AND secrets_version = ?
                    """,
                arguments: [
                    sealed, accessExpiresAt?.storedSeconds, refreshExpiresAt?.storedSeconds, at.storedSeconds,
                    AccountState.active.rawValue, at.storedSeconds, id, version,
                ])
            guard db.changesCount == 1 else {
                guard try AccountRecord.exists(db, key: id) else { throw StoreError.unknownAccount(id) }
                throw StoreError.tokensSuperseded(id)
            }
            return version + 1
        }
    }

    /// Sets an account's state and the reason shown to users.
    /// - Parameter endsRefresh: also clear the lease and the write-ahead mark, when the outcome
    ///   of the refresh is known (e.g. the server refused the refresh token). Leave it false for
    ///   outcomes that leave the token's fate unknown (timeouts): the lease then runs out by itself.
    /// - Parameter version: a refresh's outcome applies only to the tokens it was sent with.
    public func markState(id: UUID, state: AccountState, reason: String?, at: Date, endsRefresh: Bool,
                          ifVersion version: Int64?) throws {
        try performWrite("changing an account's state") { db in
            let clearMark = endsRefresh ? ", refresh_started_at = NULL, lease_owner = NULL, lease_expires_at = NULL" : ""
            try db.execute(
                sql: "UPDATE account SET state = ?, state_reason = ?, updated_at = ?\(clearMark) WHERE id = ? AND (? IS NULL OR secrets_version = ?)",
                arguments: [state.rawValue, reason, at.storedSeconds, id, version, version])
            guard db.changesCount == 1 else {
                guard try AccountRecord.exists(db, key: id) else { throw StoreError.unknownAccount(id) }
                throw StoreError.tokensSuperseded(id)
            }
        }
    }
}
