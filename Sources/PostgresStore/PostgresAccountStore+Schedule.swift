import BlueskyStore
import Foundation
import PostgresNIO

/// The shared refresh schedule: a due date per account (`refresh_due_at`, indexed per tenant),
/// taken with `FOR UPDATE SKIP LOCKED`.
extension PostgresAccountStore: SharedRefreshSchedule {
    /// Writes the dates in batches, one statement each (`unnest` of two arrays). The rows are
    /// locked in id order first: two hosts writing overlapping batches then wait for each
    /// other instead of deadlocking.
    public func setRefreshDue(_ dates: [(id: UUID, due: Date?)]) throws {
        guard !dates.isEmpty else { return }
        for start in stride(from: 0, to: dates.count, by: Self.scheduleBatch) {
            let batch = dates[start..<min(start + Self.scheduleBatch, dates.count)]
            let ids = batch.map(\.id)
            // postgres-nio binds no array of optionals: NaN stands for "never" (PostgreSQL holds NaN equal to itself).
            let due = batch.map { $0.due?.storedSeconds ?? .nan }
            try write("recording when accounts are next due") { session in
                try session.run("""
                    WITH locked AS (
                        SELECT id FROM account WHERE tenant = \(settings.tenant) AND id = ANY(\(ids)::uuid[])
                        ORDER BY id FOR UPDATE)
                    UPDATE account SET refresh_due_at = NULLIF(planned.due, 'NaN'::double precision)
                    FROM unnest(\(ids)::uuid[], \(due)::double precision[]) AS planned (id, due), locked
                    WHERE account.tenant = \(settings.tenant) AND account.id = planned.id AND locked.id = planned.id
                    """)
            }
        }
    }

    public func takeDueRefreshes(limit: Int, at now: Date) throws -> [UUID] {
        guard limit > 0 else { return [] }
        let until = now.addingTimeInterval(settings.leaseDuration).storedSeconds
        return try write("taking due accounts from the shared schedule") { session in
            try session.run("""
                UPDATE account SET refresh_due_at = \(until)
                WHERE tenant = \(settings.tenant) AND id IN (
                    SELECT id FROM account WHERE tenant = \(settings.tenant) AND refresh_due_at <= \(now.storedSeconds)
                    ORDER BY refresh_due_at LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING id
                """).rows.map { try $0.decode(UUID.self) }
        }
    }

    public func nextRefreshDue() throws -> Date? {
        try read("reading the shared schedule") { session in
            try session.run("SELECT min(refresh_due_at) FROM account WHERE tenant = \(settings.tenant)")
                .rows.first?.decode(Double?.self).map(Date.init(storedSeconds:))
        }
    }

    /// Dates written per statement.
    static let scheduleBatch = 5_000
}
