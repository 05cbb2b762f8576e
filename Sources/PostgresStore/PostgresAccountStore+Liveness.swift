import AccountStoreCore
import Foundation
import Logging
import PostgresNIO

/// Hosts' liveness, so that no host takes over an account whose lease holder is alive.
///
/// Every host writes "alive until" (the database's clock plus `aliveFor`) every `beat` on its
/// listening connection, and the tenant's last beat. A lease that ran out is taken over only
/// when its holder's liveness ran out too: a host holding rotated tokens it could not save
/// keeps the account while it lives, however long the save takes.
///
/// Time the database was away from every host (it stopped, or the network to it) is not
/// counted: when no host of the tenant beat for more than `outageGap` (one and a half beats),
/// the first beat after moves every lease and every liveness on by the gap less one beat, and
/// until a beat has come since, nothing is taken over. A host, whose liveness had at least two
/// beats left when the database went, then has at least one beat to say it is alive again,
/// however long the database was gone.
extension PostgresAccountStore {
    /// The database's clock as stored dates are (seconds since 2001-01-01).
    static let databaseNow = "(extract(epoch FROM clock_timestamp())::double precision - 978307200)"

    /// A stopped host's `alive_until` is the negated time it stopped: a beat of its that was in
    /// flight then and lands later (postgres-nio's queries do not end when their task is
    /// cancelled) cannot make it alive again, and the row is pruned a day later like a
    /// crashed host's.
    static let keptFor: TimeInterval = 86_400

    /// How often this host says it is alive: a quarter of the lease, at most 10 s.
    var beat: TimeInterval { min(10, settings.leaseDuration / 4) }
    /// How long one beat keeps a host alive: three beats.
    var aliveFor: TimeInterval { 3 * beat }
    /// A tenant whose last beat is older than this was away from every host.
    var outageGap: TimeInterval { 1.5 * beat }

    /// One beat, in one transaction on `connection`: moves leases and liveness over a gap
    /// every host was away for, records this host's liveness, and gives back this host's leases
    /// that ran out, but for those of `kept` (rotated tokens not saved yet). A lease outlives
    /// its refresh, so one of this host's that ran out is one whose release was not recorded (a
    /// write lost with the database, a claim that answered after its deadline); its mark stays,
    /// so the next host knows a refresh may have been left unfinished. Returns the database's
    /// clock, for the skew check. It also says which keys this host holds, and reads which one
    /// the tenant writes with (`adoptWritingKey`).
    func heartbeat(on connection: PostgresConnection, keeping kept: Set<UUID>) async throws -> Date {
        let (tenant, me, aliveFor, outageGap) = (settings.tenant, leaseOwner, aliveFor, outageGap)
        let session = PostgresSession(connection: connection, logger: logger)
        try await session.run("BEGIN")
        do {
            // The tenant's clock row first (hosts beating together take turns), then the time.
            let lastBeat = try await session.run("SELECT last_beat FROM blueskyd_clock WHERE tenant = \(tenant) FOR UPDATE")
                .first?.decode(Double.self)
            guard let now = try await session.run("SELECT \(unescaped: Self.databaseNow)").first?.decode(Double.self) else {
                throw StoreError.database(context: "saying this host is alive", reason: "the database's clock could not be read")
            }
            if let lastBeat, now - lastBeat > outageGap {
                let gap = now - lastBeat - beat
                try await session.run("""
                    UPDATE account SET lease_expires_at = lease_expires_at + \(gap)
                    WHERE id IN (SELECT id FROM account WHERE tenant = \(tenant) AND lease_owner IS NOT NULL ORDER BY id FOR UPDATE)
                    """)
                try await session.run("UPDATE blueskyd_host SET alive_until = alive_until + \(gap) WHERE tenant = \(tenant) AND alive_until >= 0")
                logger.notice("the database was away from every host; leases were moved on by that long", metadata: [
                    "gapSeconds": "\(Int(gap))"])
            }
            try await session.run("""
                INSERT INTO blueskyd_clock (tenant, last_beat) VALUES (\(tenant), \(now))
                ON CONFLICT (tenant) DO UPDATE SET last_beat = greatest(blueskyd_clock.last_beat, excluded.last_beat)
                """)
            // The tenant's writing key taken up first, so that the keys this beat reports (the
            // writing one first) tell a rekey that this host seals with it.
            if let missing = adoptWritingKey(try await Self.tenantWritingKey(tenant, on: session)) { noteMissingWritingKey(missing) }
            let keys = sealer.fingerprints
            try await session.run("""
                INSERT INTO blueskyd_host (tenant, owner, alive_until, keys) VALUES (\(tenant), \(me), \(now + aliveFor), \(keys))
                ON CONFLICT (tenant, owner) DO UPDATE SET alive_until = excluded.alive_until, keys = excluded.keys
                WHERE blueskyd_host.alive_until >= 0
                """)
            try await session.run("""
                DELETE FROM blueskyd_host WHERE tenant = \(tenant) AND abs(alive_until) < \(now - Self.keptFor)
                """)
            try await session.run("""
                UPDATE account SET lease_owner = NULL, lease_expires_at = NULL
                WHERE id IN (SELECT id FROM account WHERE tenant = \(tenant) AND lease_owner = \(me) AND lease_expires_at < \(now)
                             AND NOT id = ANY(\(Array(kept))) ORDER BY id FOR UPDATE)
                """)
            try await session.run("COMMIT")
            return Date(storedSeconds: now)
        } catch {
            if !connection.isClosed { _ = try? await session.run("ROLLBACK") }
            throw error
        }
    }

    /// The hosts of this tenant alive now (by their lease owner names: host, pid, start), by
    /// the database's clock: a copy of the tenant refuses to start while any runs.
    public func liveHosts() async throws(StoreError) -> [String] {
        let tenant = settings.tenant
        return try await read("reading the tenant's live hosts") { session in
            try await session.run("""
                SELECT owner FROM blueskyd_host WHERE tenant = \(tenant) AND alive_until > \(unescaped: Self.databaseNow) ORDER BY owner
                """).map { try $0.decode(String.self) }
        }
    }

    /// Says this host is gone (a clean stop): its leases may be taken over once they run out.
    func forgetLiveness() async {
        let (tenant, me) = (settings.tenant, leaseOwner)
        // A mark, not a deletion: whichever of it and a late beat lands last, the mark stays.
        do {
            try await write("saying this host stops") { session in
                try await session.run("""
                    INSERT INTO blueskyd_host (tenant, owner, alive_until) VALUES (\(tenant), \(me), -\(unescaped: Self.databaseNow))
                    ON CONFLICT (tenant, owner) DO UPDATE SET alive_until = excluded.alive_until
                    """)
            }
        } catch {
            // Nothing is lost: its leases wait for its last beat's liveness to run out instead.
            logger.warning("this host's stop could not be recorded; other hosts take its accounts over once its last beat runs out", metadata: [
                "error": "\(error)", "seconds": "\(Int(aliveFor))"])
        }
    }
}
