import BlueskyStore
import Foundation
import PostgresNIO

extension PostgresAccountStore {
    /// Takes the refresh lease in one transaction that locks the row, checks it and writes the
    /// lease: granted only while the tokens are still at `version` and no other host's lease is
    /// running. A row another host is locking at this moment (its own claim, or its take from
    /// the schedule) is waited for, a few milliseconds, and then read as that host left it.
    public func claimRefresh(id: UUID, expecting version: Int64, at now: Date) throws -> RefreshClaim {
        let until = now.addingTimeInterval(settings.leaseDuration).storedSeconds
        return try write("marking a refresh as started") { session in
            let locked = try session.run("""
                SELECT secrets_version, lease_owner, lease_expires_at, refresh_started_at FROM account
                WHERE tenant = \(settings.tenant) AND id = \(id) FOR UPDATE
                """).rows.first
            guard let locked else { throw StoreError.unknownAccount(id) }
            let (current, owner, expires, interrupted) = try locked.decode((Int64, String?, Double?, Double?).self)
            guard current == version else { return .superseded(version: current) }
            if let owner, owner != leaseOwner, let expires, expires > now.storedSeconds {
                return .held(by: owner, until: Date(storedSeconds: expires))
            }
            try session.run("""
                UPDATE account SET refresh_started_at = \(now.storedSeconds), lease_owner = \(leaseOwner),
                    lease_expires_at = \(until), updated_at = \(now.storedSeconds)
                WHERE tenant = \(settings.tenant) AND id = \(id)
                """)
            return .granted(interruptedAt: interrupted.map(Date.init(storedSeconds:)))
        }
    }

    /// Stores rotated tokens over the version they were refreshed from, clears the lease and the
    /// mark, announces the change. Committed with `synchronous_commit = on`: when this returns
    /// the tokens survive a crash of the database server.
    public func saveRefreshedSession(id: UUID, secrets: AccountSecrets, accessExpiresAt: Date?, refreshExpiresAt: Date?,
                                     at: Date, replacing version: Int64) throws -> Int64 {
        let sealed = ByteBuffer(bytes: try sealer.seal(secrets, account: id))
        return try write("saving a refreshed session") { session in
            let rows = try session.run(notifying("""
                UPDATE account SET
                    sealed_secrets = \(sealed), secrets_version = secrets_version + 1,
                    access_expires_at = \(accessExpiresAt?.storedSeconds), refresh_expires_at = \(refreshExpiresAt?.storedSeconds),
                    last_refresh_at = \(at.storedSeconds), refresh_started_at = NULL, lease_owner = NULL,
                    lease_expires_at = NULL, state = \(AccountState.active.rawValue), state_reason = NULL,
                    updated_at = \(at.storedSeconds)
                WHERE tenant = \(settings.tenant) AND id = \(id) AND secrets_version = \(version)
                """, returning: "secrets_version, id")).rows
            guard let row = rows.first else { throw try missedVersion(session, id: id) }
            return try row.decode(Int64.self)
        }
    }

    /// Sets an account's state and reason; with `endsRefresh`, also gives the lease back if it
    /// is this host's (another host may have taken the account over since: its lease and mark
    /// stay). Without it the lease runs out by itself. With `version`, only while the tokens are
    /// still at it.
    public func markState(id: UUID, state: AccountState, reason: String?, at: Date, endsRefresh: Bool,
                          ifVersion version: Int64?) throws {
        try write("changing an account's state") { session in
            // Every right-hand side reads the row as it was, so the owner is tested before it is cleared.
            let mine = "lease_owner IS NULL OR lease_owner = $7"
            let release = endsRefresh
                ? """
                  , refresh_started_at = CASE WHEN \(mine) THEN NULL ELSE refresh_started_at END,
                  lease_expires_at = CASE WHEN \(mine) THEN NULL ELSE lease_expires_at END,
                  lease_owner = CASE WHEN \(mine) THEN NULL ELSE lease_owner END
                  """ : ""
            let rows = try session.run(notifying(PostgresQuery(
                unsafeSQL: "UPDATE account SET state = $1, state_reason = $2, updated_at = $3\(release) "
                    + "WHERE tenant = $4 AND id = $5 AND ($6::bigint IS NULL OR secrets_version = $6)",
                binds: Self.binds(state.rawValue, reason, at.storedSeconds, settings.tenant, id, version, leaseOwner)))).rows
            guard rows.isEmpty else { return }
            throw try missedVersion(session, id: id)
        }
    }

    /// Why a write fenced on the tokens' version changed nothing: the account is gone, or its
    /// tokens are newer than the version asked for.
    private func missedVersion(_ session: PostgresSessionHandle, id: UUID) throws -> StoreError {
        let exists = try session.run("SELECT 1 FROM account WHERE tenant = \(settings.tenant) AND id = \(id)").rows
        return exists.isEmpty ? .unknownAccount(id) : .tokensSuperseded(id)
    }
}
