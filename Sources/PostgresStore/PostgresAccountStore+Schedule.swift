import AccountStoreCore
import Foundation
import PostgresNIO

/// The shared refresh schedule: a due date per account (`refresh_due_at`, indexed per tenant),
/// taken with `FOR UPDATE SKIP LOCKED`.
extension PostgresAccountStore: SharedRefreshSchedule {
    /// Writes the dates in batches, one statement each (`unnest` of three arrays) committed
    /// alone, each only over the tokens' version it was decided for. The rows are locked in id
    /// order first: two hosts writing overlapping batches then wait for each other instead of
    /// deadlocking.
    public func setRefreshDue(_ dates: [ScheduledDate]) async throws(StoreError) {
        guard !dates.isEmpty else { return }
        let tenant = settings.tenant
        for start in stride(from: 0, to: dates.count, by: Self.scheduleBatch) {
            let batch = dates[start..<min(start + Self.scheduleBatch, dates.count)]
            let ids = batch.map(\.id)
            // postgres-nio binds no array of optionals: NaN stands for "never" (PostgreSQL holds NaN equal to itself).
            let due = batch.map { $0.due?.storedSeconds ?? .nan }
            let versions = batch.map(\.version)
            try await writeAlone("recording when accounts are next due") { session in
                try await session.run("""
                    WITH locked AS (
                        SELECT id FROM account WHERE tenant = \(tenant) AND id = ANY(\(ids)::uuid[])
                        ORDER BY id FOR UPDATE)
                    UPDATE account SET refresh_due_at = NULLIF(planned.due, 'NaN'::double precision)
                    FROM unnest(\(ids)::uuid[], \(due)::double precision[], \(versions)::bigint[]) AS planned (id, due, version),
                        locked
                    WHERE account.tenant = \(tenant) AND account.id = planned.id AND locked.id = planned.id
                        AND account.secrets_version = planned.version
                    """)
            }
        }
    }

    /// One statement, committed alone, which hands back the rows as taken with their secrets:
    /// the host needs no read of each before its claim. The take is committed before its rows
    /// are read, so a row this host cannot read (sealed under a key it lacks, during a rekey) is
    /// left out and logged, not made the whole batch's failure: it falls due again after the
    /// lease, as an account this host took and could not refresh always did. Secrets that do not
    /// open here come as nil: the refresh reads them again and meets the reason itself.
    public func takeDueRefreshes(limit: Int, at now: Date, skipping servers: Set<String>) async throws(StoreError) -> [TakenAccount] {
        guard limit > 0 else { return [] }
        let (tenant, until, skipped) = (settings.tenant, now.addingTimeInterval(settings.leaseDuration).storedSeconds,
                                        Array(servers))
        let rows = try await writeAlone("taking due accounts from the shared schedule") { session in
            try await session.run("""
                UPDATE account SET refresh_due_at = \(until)
                WHERE tenant = \(tenant) AND id IN (
                    SELECT id FROM account WHERE tenant = \(tenant) AND refresh_due_at <= \(now.storedSeconds)
                        AND NOT (refresh_server = ANY(\(skipped)::text[]))
                    ORDER BY refresh_due_at LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING \(unescaped: Self.recordColumns), sealed_secrets
                """)
        }
        var taken: [TakenAccount] = []
        taken.reserveCapacity(rows.count)
        for row in rows {
            do {
                let record = try verified(row)
                let cells = row.makeRandomAccess()
                let secrets = try? openSecrets(of: record, sealed: try cells["sealed_secrets"].decode(ByteBuffer.self),
                                               by: try cells["sealed_by"].decode(String?.self))
                taken.append(TakenAccount(record: record, secrets: secrets))
            } catch {
                logger.warning("took an account from the shared schedule whose row cannot be read here; it falls due again after the lease",
                               metadata: ["error": "\(error)"])
            }
        }
        return taken
    }

    public func nextRefreshDue() async throws(StoreError) -> Date? {
        let tenant = settings.tenant
        return try await read("reading the shared schedule") { session in
            try await session.run("SELECT min(refresh_due_at) FROM account WHERE tenant = \(tenant)")
                .first?.decode(Double?.self).map(Date.init(storedSeconds:))
        }
    }

    public func repairMissingDueDates(at now: Date) async throws(StoreError) -> Int {
        let tenant = settings.tenant
        return try await write("repairing the shared schedule") { session in
            try await session.run("""
                UPDATE account SET refresh_due_at = \(now.storedSeconds)
                WHERE tenant = \(tenant) AND refresh_due_at IS NULL AND state <> \(AccountState.needsLogin.rawValue)
                RETURNING id
                """).count
        }
    }

    /// Makes accounts due at `now` whatever their tokens' version: the start of an expiry storm,
    /// for tests and benchmarks that seed a database.
    package func makeDue(_ ids: [UUID], at now: Date) async throws(StoreError) {
        let tenant = settings.tenant
        try await write("making accounts due") { session in
            try await session.run("""
                UPDATE account SET refresh_due_at = \(now.storedSeconds) WHERE tenant = \(tenant) AND id = ANY(\(ids)::uuid[])
                """)
        }
    }

    /// Dates written per statement.
    static let scheduleBatch = 5_000
}
