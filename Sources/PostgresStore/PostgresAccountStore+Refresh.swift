import AccountStoreCore
import Foundation
import PostgresNIO

extension PostgresAccountStore {
    /// Takes the refresh lease in one transaction that locks the row, checks it and writes the
    /// lease, by the database's clock: granted only while the tokens are still at `version` and
    /// no other host's lease is running, nor its holder alive (it may hold rotated tokens it
    /// has not saved yet), nor the database just back from being away from every host (until a
    /// host's beat has moved the leases on). A row another host is locking at this moment (its
    /// own claim, or its take from the schedule) is waited for, a few milliseconds, and then
    /// read as that host left it.
    ///
    /// Refused (as a failed write) while the tenant seals with a key this host does not hold
    /// (a rekey named it): a refresh whose rotated tokens could not be saved would spend the
    /// refresh token for nothing, and lose the session when the host stops.
    public func claimRefresh(id: UUID, expecting version: Int64, at now: Date) async throws(StoreError) -> RefreshClaim {
        let (tenant, me, lease, beat, outageGap) = (settings.tenant, leaseOwner, settings.leaseDuration, beat, outageGap)
        return try await write("marking a refresh as started") { [self] session in
            let locked = try await session.run("""
                SELECT a.secrets_version, a.lease_owner, a.lease_expires_at, a.refresh_started_at,
                    \(unescaped: Self.databaseNow), h.alive_until, c.last_beat, k.fingerprint, k.previous
                FROM account a
                LEFT JOIN blueskyd_host h ON h.tenant = a.tenant AND h.owner = a.lease_owner
                LEFT JOIN blueskyd_clock c ON c.tenant = a.tenant
                LEFT JOIN blueskyd_tenant_key k ON k.tenant = a.tenant
                WHERE a.tenant = \(tenant) AND a.id = \(id) FOR UPDATE OF a
                """).first
            guard let locked else { throw StoreError.unknownAccount(id) }
            let (current, owner, expires, interrupted, databaseNow, aliveUntil, lastBeat, named, previous)
                = try locked.decode((Int64, String?, Double?, Double?, Double, Double?, Double?, String?, String?).self)
            try requireSavable(named: named, previous: previous)
            let clock = Date(storedSeconds: databaseNow)
            if let verdict = RefreshClaim.decide(storedVersion: current, expected: version, owner: owner,
                                                 leaseEnds: expires.map(Date.init(storedSeconds:)), me: me, now: clock) {
                return verdict
            }
            if let owner, owner != me {
                if let aliveUntil, aliveUntil > databaseNow {
                    return .held(by: owner, until: Date(storedSeconds: aliveUntil))
                }
                if let lastBeat, databaseNow - lastBeat > outageGap {
                    return .held(by: owner, until: clock.addingTimeInterval(beat))
                }
            }
            try await session.run("""
                UPDATE account SET refresh_started_at = \(now.storedSeconds), lease_owner = \(me),
                    lease_expires_at = \(databaseNow + lease), updated_at = \(now.storedSeconds)
                WHERE tenant = \(tenant) AND id = \(id)
                """)
            return .granted(interruptedAt: interrupted.map(Date.init(storedSeconds:)))
        }
    }

    /// Stores rotated tokens over the version they were refreshed from, clears the lease and the
    /// mark, announces the change. Committed with `synchronous_commit = on`: when this returns
    /// the tokens survive a crash of the database server.
    public func saveRefreshedSession(id: UUID, secrets: AccountSecrets, accessExpiresAt: Date?, refreshExpiresAt: Date?,
                                     scope: String?, handle: String?, at: Date,
                                     replacing version: Int64) async throws(StoreError) -> Int64 {
        let sealed = try seal(secrets, account: id)
        let tenant = settings.tenant
        return try await write("saving a refreshed session") { [self] session in
            // A rename changes a sealed column: sealed anew from the locked row, over a seal that held.
            var renamed: Sealed?
            if let handle {
                guard let newSeal = try await renamedSeal(session, id: id, handle: handle, version: version) else {
                    throw try await missedVersion(session, id: id)
                }
                renamed = newSeal
            }
            let query = notifying("""
            UPDATE account SET
                sealed_secrets = \(sealed.bytes), sealed_by = \(sealed.by), secrets_version = secrets_version + 1,
                access_expires_at = \(accessExpiresAt?.storedSeconds), refresh_expires_at = \(refreshExpiresAt?.storedSeconds),
                last_refresh_at = \(at.storedSeconds), refresh_started_at = NULL, lease_owner = NULL,
                lease_expires_at = NULL, state = \(AccountState.active.rawValue), state_reason = NULL,
                updated_at = \(at.storedSeconds), oauth_scope = COALESCE(\(scope), oauth_scope),
                handle_verified = handle_verified AND \(handle)::text IS NULL, handle = COALESCE(\(handle), handle),
                metadata_seal = COALESCE(\(renamed?.bytes), metadata_seal),
                metadata_sealed_by = COALESCE(\(renamed?.by), metadata_sealed_by)
            WHERE tenant = \(tenant) AND id = \(id) AND secrets_version = \(version)
            """, ids: [id], returning: "secrets_version, id")
            guard let row = try await session.run(query).first else { throw try await missedVersion(session, id: id) }
            return try row.decode((Int64, UUID).self).0
        }
    }

    /// Sets an account's state and reason; `lease` gives this host's lease back (another host
    /// may have taken the account over since: its lease and mark stay). With `version`, only
    /// while the tokens are still at it.
    public func markState(id: UUID, state: AccountState, reason: String?, at: Date, lease: LeaseRelease,
                          ifVersion version: Int64?) async throws(StoreError) {
        // Every right-hand side reads the row as it was, so the owner is tested before it is cleared.
        let mine = "lease_owner IS NULL OR lease_owner = $7"
        let release = switch lease {
        case .keep: ""
        case .releaseKeepingMark:
            ", lease_expires_at = CASE WHEN \(mine) THEN NULL ELSE lease_expires_at END, "
                + "lease_owner = CASE WHEN \(mine) THEN NULL ELSE lease_owner END"
        case .release:
            ", refresh_started_at = CASE WHEN \(mine) THEN NULL ELSE refresh_started_at END, "
                + "lease_expires_at = CASE WHEN \(mine) THEN NULL ELSE lease_expires_at END, "
                + "lease_owner = CASE WHEN \(mine) THEN NULL ELSE lease_owner END"
        }
        let query = notifying(PostgresQuery(
            unsafeSQL: "UPDATE account SET state = $1, state_reason = $2, updated_at = $3\(release) "
                + "WHERE tenant = $4 AND id = $5 AND ($6::bigint IS NULL OR secrets_version = $6)",
            binds: Self.binds(state.rawValue, reason, at.storedSeconds, settings.tenant, id, version, leaseOwner)), ids: [id])
        try await write("changing an account's state") { [self] session in
            guard try await session.run(query).isEmpty else { return }
            throw try await missedVersion(session, id: id)
        }
    }

    /// Why a write fenced on the tokens' version changed nothing.
    private func missedVersion(_ session: PostgresSession, id: UUID) async throws -> StoreError {
        let exists = try await session.run("SELECT 1 FROM account WHERE tenant = \(settings.tenant) AND id = \(id)")
        return StoreError.fencedWriteMissed(id, accountExists: !exists.isEmpty)
    }
}
