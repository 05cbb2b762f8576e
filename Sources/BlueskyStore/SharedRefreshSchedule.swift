import Foundation

/// A refresh schedule kept in the store itself, which several hosts share: each host records
/// when an account is next due, and takes due accounts for itself, so that the work spreads
/// over the hosts by itself and an account a host took but never finished falls due again.
///
/// Only a store that several hosts share has one (`PostgresAccountStore`); with SQLite the
/// daemon keeps its schedule in memory. Every method may block: call them off the event loops.
public protocol SharedRefreshSchedule: Sendable {
    /// Records when each account is next due, whichever host refreshes it then; nil: never
    /// (it waits for a new login). An unknown (removed) account is skipped.
    func setRefreshDue(_ dates: [(id: UUID, due: Date?)]) throws
    /// Takes up to `limit` of the accounts due by `now`, the earliest due first (their ids come
    /// back in no particular order), for this host: each one's
    /// due date moves to the end of a lease from `now`, so that no other host takes it
    /// meanwhile, and so that it falls due again if this host never records a new date (it
    /// died). Rows another host is taking at this moment are skipped, not waited for.
    func takeDueRefreshes(limit: Int, at now: Date) throws -> [UUID]
    /// The earliest due date of any account, or nil when none is scheduled.
    func nextRefreshDue() throws -> Date?
}
