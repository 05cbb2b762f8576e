import Foundation

/// A refresh schedule kept in the store itself, which several hosts share: each host records
/// when an account is next due, and takes due accounts for itself, so that the work spreads
/// over the hosts by itself and an account a host took but never finished falls due again.
///
/// Only a store that several hosts share has one (`PostgresAccountStore`); with SQLite the
/// daemon keeps its schedule in memory.
public protocol SharedRefreshSchedule: Sendable {
    /// Records when each account is next due, whichever host refreshes it then (nil: never; it
    /// waits for a new login). Each date was decided for the tokens at `version`: where newer
    /// tokens are stored (another host refreshed, a login replaced them) it is stale and
    /// skipped, so that a late "never" cannot drop an account that was signed in again. An
    /// unknown (removed) account is skipped.
    func setRefreshDue(_ dates: [ScheduledDate]) async throws(StoreError)
    /// Takes up to `limit` of the accounts due by `now`, the earliest due first (they come back
    /// in no particular order, each as stored at the take, its metadata seal checked), for this
    /// host: each one's due date moves to the end of a lease from `now`, so that no other host
    /// takes it meanwhile, and so that it falls due again if this host never records a new
    /// date (it died). Rows another host is taking at this moment are skipped, not waited for.
    /// `skipping` are servers whose accounts this host cannot start now (their refresh slots
    /// are full): they are left for other hosts. Each comes with its secrets as read in the same
    /// statement, so that its refresh reads nothing before its claim.
    func takeDueRefreshes(limit: Int, at now: Date, skipping servers: Set<String>) async throws(StoreError) -> [TakenAccount]
    /// The earliest due date of any account, or nil when none is scheduled.
    func nextRefreshDue() async throws(StoreError) -> Date?
    /// Gives every account that may be refreshed but has no due date one (`now`): a date
    /// lost in a race with a login must not leave an account unscheduled for good. Returns
    /// how many were repaired.
    func repairMissingDueDates(at now: Date) async throws(StoreError) -> Int
}

/// One account's next due date, as decided for the tokens at `version`.
public struct ScheduledDate: Sendable, Equatable {
    public var id: UUID
    public var due: Date?
    public var version: Int64

    public init(id: UUID, due: Date?, version: Int64) {
        self.id = id
        self.due = due
        self.version = version
    }
}

/// An account as the shared schedule's take read it: its row, and the secrets stored with that
/// row (at its `secretsVersion`), or nil when this host cannot open them (the refresh then reads
/// them itself, and meets the reason: a changed row, a key this host lacks).
public struct TakenAccount: Sendable {
    public var record: AccountRecord
    public var secrets: AccountSecrets?

    public init(record: AccountRecord, secrets: AccountSecrets?) {
        self.record = record
        self.secrets = secrets
    }
}
