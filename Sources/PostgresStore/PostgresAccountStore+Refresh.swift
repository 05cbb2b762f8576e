import AccountStoreCore
import Foundation
import PostgresNIO

extension PostgresAccountStore {
    /// Takes the refresh lease: granted only while the tokens are still at `version` and no
    /// other host's lease is running, nor its holder alive (it may hold rotated tokens it has
    /// not saved yet), nor the database just back from being away from every host (until a
    /// host's beat has moved the leases on); all by the database's clock.
    ///
    /// One round trip in a storm: a lease nobody holds, or this host's own, over tokens still
    /// at `version`, while the tenant names no writing key or this host's, is granted by one
    /// statement that checks all of it on the locked row (`claimRefreshAlone`). Every other
    /// verdict needs the lease holder's liveness and the tenant's beat: the statement changes
    /// nothing, and the claim is decided by reading the row (`claimRefreshByRead`).
    ///
    /// Refused (as a failed write) while the tenant seals with a key this host does not hold
    /// (a rekey named it): a refresh whose rotated tokens could not be saved would spend the
    /// refresh token for nothing, and lose the session when the host stops.
    public func claimRefresh(id: UUID, expecting version: Int64, at now: Date) async throws(StoreError) -> RefreshClaim {
        if let granted = try await claimRefreshAlone(id: id, expecting: version, at: now) { return granted }
        return try await claimRefreshByRead(id: id, expecting: version, at: now)
    }

    /// The grant in one statement, committed alone, or nil (nothing written) when the row is
    /// not plainly claimable: another host's lease on it, newer tokens, a tenant key other than
    /// the one this host seals with (the read decides those, and takes up a key it holds).
    /// The row is locked by the statement's own subquery (waiting for a writer that holds it, then
    /// reading the row as that writer left it), which also hands back the mark of an interrupted
    /// refresh as it was just before this grant; a row another host's lease is on is not locked.
    /// The statement is prepared (`ClaimAloneStatement`, whose rules must change with
    /// `RefreshClaim.decide`'s and `requireSavable`'s).
    package func claimRefreshAlone(id: UUID, expecting version: Int64, at now: Date) async throws(StoreError) -> RefreshClaim? {
        let claim = ClaimAloneStatement(now: now.storedSeconds, owner: leaseOwner, lease: settings.leaseDuration,
                                        tenant: settings.tenant, id: id, version: version,
                                        writingKey: sealer.writingFingerprint)
        let rows = try await writeAlone("marking a refresh as started") { session in
            try await session.run(claim).first
        }
        guard let row = rows else { return nil }
        aloneClaims.add(1, ordering: .relaxed)
        return .granted(interruptedAt: row.map(Date.init(storedSeconds:)))
    }

    /// The claim decided over a read of the row: two round trips. The row is read, the verdict
    /// taken over it (`RefreshClaim.decide` and the host checks below), and a grant written
    /// only while the row's lease and tokens are still as read (a compare-and-set, committed
    /// alone). A row whose lease or tokens changed in between (another host's claim or save; a
    /// take from the schedule changes neither) goes the locked way: one transaction that locks
    /// the row, reads, decides and writes, waiting a few milliseconds for whoever holds the row.
    package func claimRefreshByRead(id: UUID, expecting version: Int64, at now: Date) async throws(StoreError) -> RefreshClaim {
        let (tenant, me, lease) = (settings.tenant, leaseOwner, settings.leaseDuration)
        let facts = try await read("marking a refresh as started") { [self] session in
            try await claimFacts(session, id: id, locking: false)
        }
        let judged: ClaimVerdict
        do {
            judged = try verdict(facts, expecting: version)
        } catch {
            // A claim refused for the tenant's key is a refused write, as on the locked way.
            if case .database(_, let reason) = error { health.recordFailure(reason) }
            throw error
        }
        if case .decided(let verdict) = judged { return verdict }
        if let hook = claimRaceHook.withLock({ $0 }) { await hook() }
        let written = try await writeAlone("marking a refresh as started") { session in
            try await session.run("""
                UPDATE account SET refresh_started_at = \(now.storedSeconds), lease_owner = \(me),
                    lease_expires_at = \(unescaped: Self.databaseNow) + \(lease), updated_at = \(now.storedSeconds)
                WHERE tenant = \(tenant) AND id = \(id) AND secrets_version = \(facts.version)
                    AND lease_owner IS NOT DISTINCT FROM \(facts.owner)
                    AND lease_expires_at IS NOT DISTINCT FROM \(facts.leaseEnds)
                    AND refresh_started_at IS NOT DISTINCT FROM \(facts.interrupted)
                RETURNING 1
                """).count == 1
        }
        guard written else {
            lockedClaims.add(1, ordering: .relaxed)
            return try await claimRefreshLocked(id: id, expecting: version, at: now)
        }
        return .granted(interruptedAt: facts.interrupted.map(Date.init(storedSeconds:)))
    }

    /// The claim in one transaction that locks the row, reads it, decides and writes: the way a
    /// claim goes when the row changed between its read and its write.
    package func claimRefreshLocked(id: UUID, expecting version: Int64, at now: Date) async throws(StoreError) -> RefreshClaim {
        let (tenant, me, lease) = (settings.tenant, leaseOwner, settings.leaseDuration)
        return try await write("marking a refresh as started") { [self] session in
            let facts = try await claimFacts(session, id: id, locking: true)
            if case .decided(let verdict) = try verdict(facts, expecting: version) { return verdict }
            try await session.run("""
                UPDATE account SET refresh_started_at = \(now.storedSeconds), lease_owner = \(me),
                    lease_expires_at = \(facts.databaseNow + lease), updated_at = \(now.storedSeconds)
                WHERE tenant = \(tenant) AND id = \(id)
                """)
            return .granted(interruptedAt: facts.interrupted.map(Date.init(storedSeconds:)))
        }
    }

    /// What a claim is decided over: the account's tokens and lease, the lease holder's
    /// liveness, the tenant's last beat and its writing key.
    private func claimFacts(_ session: PostgresSession, id: UUID, locking: Bool) async throws -> ClaimFacts {
        let tenant = settings.tenant
        let rows = try await session.run("""
            SELECT a.secrets_version, a.lease_owner, a.lease_expires_at, a.refresh_started_at,
                \(unescaped: Self.databaseNow), h.alive_until, c.last_beat, k.fingerprint, k.previous
            FROM account a
            LEFT JOIN blueskyd_host h ON h.tenant = a.tenant AND h.owner = a.lease_owner
            LEFT JOIN blueskyd_clock c ON c.tenant = a.tenant
            LEFT JOIN blueskyd_tenant_key k ON k.tenant = a.tenant
            WHERE a.tenant = \(tenant) AND a.id = \(id) \(unescaped: locking ? "FOR UPDATE OF a" : "")
            """)
        guard let row = rows.first else { throw StoreError.unknownAccount(id) }
        let (version, owner, leaseEnds, interrupted, databaseNow, aliveUntil, lastBeat, named, previous)
            = try row.decode((Int64, String?, Double?, Double?, Double, Double?, Double?, String?, String?).self)
        return ClaimFacts(version: version, owner: owner, leaseEnds: leaseEnds, interrupted: interrupted,
                          databaseNow: databaseNow, aliveUntil: aliveUntil, lastBeat: lastBeat,
                          writingKey: named, previousKey: previous)
    }

    /// The claim's verdict over `facts`: one to give now, or a grant to write.
    private func verdict(_ facts: ClaimFacts, expecting version: Int64) throws(StoreError) -> ClaimVerdict {
        try requireSavable(named: facts.writingKey, previous: facts.previousKey)
        let clock = Date(storedSeconds: facts.databaseNow)
        if let verdict = RefreshClaim.decide(storedVersion: facts.version, expected: version, owner: facts.owner,
                                             leaseEnds: facts.leaseEnds.map(Date.init(storedSeconds:)), me: leaseOwner, now: clock) {
            return .decided(verdict)
        }
        if let owner = facts.owner, owner != leaseOwner {
            if let aliveUntil = facts.aliveUntil, aliveUntil > facts.databaseNow {
                return .decided(.held(by: owner, until: Date(storedSeconds: aliveUntil)))
            }
            if let lastBeat = facts.lastBeat, facts.databaseNow - lastBeat > outageGap {
                return .decided(.held(by: owner, until: clock.addingTimeInterval(beat)))
            }
        }
        return .grant
    }

    /// Stores rotated tokens over the version they were refreshed from, clears the lease and the
    /// mark, announces the change. Committed with `synchronous_commit = on`: when this returns
    /// the tokens survive a crash of the database server.
    public func saveRefreshedSession(id: UUID, secrets: AccountSecrets, accessExpiresAt: Date?, refreshExpiresAt: Date?,
                                     scope: String?, handle: String?, at: Date,
                                     replacing version: Int64) async throws(StoreError) -> Int64 {
        let save = SaveRefreshedStatement(sealed: try seal(secrets, account: id), accessExpiresAt: accessExpiresAt?.storedSeconds,
                                          refreshExpiresAt: refreshExpiresAt?.storedSeconds, at: at.storedSeconds, scope: scope,
                                          handle: handle, tenant: settings.tenant, id: id, version: version)
        guard let handle else {
            // One statement, committed alone: one round trip.
            let saved = try await writeAlone("saving a refreshed session") { [self] session in try await send(save, session) }
            if let saved { return saved }
            throw try await read("saving a refreshed session") { [self] session in try await missedVersion(session, id: id) }
        }
        return try await write("saving a refreshed session") { [self] session in
            // A rename changes a sealed column: sealed anew from the locked row, over a seal that held.
            guard let renamed = try await renamedSeal(session, id: id, handle: handle, version: version) else {
                throw try await missedVersion(session, id: id)
            }
            var renaming = save
            renaming.renamed = renamed
            guard let saved = try await send(renaming, session) else { throw try await missedVersion(session, id: id) }
            return saved
        }
    }

    /// The save, announced: prepared while this host holds one key, else the same update through
    /// `notifying`, which announces it on every key's channel. Nil when the tokens were no
    /// longer at the version saved over.
    private func send(_ save: SaveRefreshedStatement, _ session: PostgresSession) async throws -> Int64? {
        if signers.count == 1, let signer = signers.first {
            var save = save
            (save.channel, save.payload) = (signer.channel, signer.payload(owner: leaseOwner, id: save.id))
            return try await session.run(save).first
        }
        let update = PostgresQuery(unsafeSQL: SaveRefreshedStatement.update, binds: save.updateBindings())
        return try await session.run(notifying(update, ids: [save.id], returning: "secrets_version, id")).first
            .map { try $0.decode((Int64, UUID).self).0 }
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

/// The row and the facts around it that a claim is decided over.
struct ClaimFacts: Sendable {
    var version: Int64
    var owner: String?
    var leaseEnds: Double?
    var interrupted: Double?
    var databaseNow: Double
    var aliveUntil: Double?
    var lastBeat: Double?
    var writingKey: String?
    var previousKey: String?
}

/// A claim's verdict before it is written: given now, or a grant to write.
enum ClaimVerdict: Sendable {
    case decided(RefreshClaim)
    case grant
}
