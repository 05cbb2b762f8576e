import Foundation

/// The rules every backend applies alike, written once: each backend reads and writes its rows
/// in its own SQL, and asks these what the rows mean.
extension RefreshClaim {
    /// The claim's verdict over the row as locked: the stored tokens' `version`, the lease's
    /// `owner` and end, compared with what the claimant expected and who it is. `nil` from a
    /// grant's point of view means the lease is free. PostgreSQL's one-statement claim
    /// (`claimRefreshAlone`) writes the cases that grant without a read in SQL: change both.
    package static func decide(storedVersion: Int64, expected: Int64, owner: String?, leaseEnds: Date?,
                               me: String, now: Date) -> RefreshClaim? {
        guard storedVersion == expected else { return .superseded(version: storedVersion) }
        if let owner, owner != me, let leaseEnds, leaseEnds > now { return .held(by: owner, until: leaseEnds) }
        return nil
    }
}

extension StoreError {
    /// Why a write fenced on the tokens' version changed nothing: the account is gone, or its
    /// tokens are newer than the version asked for.
    package static func fencedWriteMissed(_ id: UUID, accountExists: Bool) -> StoreError {
        accountExists ? .tokensSuperseded(id) : .unknownAccount(id)
    }
}

extension Date {
    /// How dates are stored: seconds since 2001-01-01 UTC, Foundation's own representation, so
    /// that a date read back compares equal to the one written (converting to seconds since
    /// 1970 and back can lose the last bit).
    package var storedSeconds: Double { timeIntervalSinceReferenceDate }

    package init(storedSeconds: Double) {
        self.init(timeIntervalSinceReferenceDate: storedSeconds)
    }
}
