import BlueskyStore
import DPoP
import Foundation

/// An account session's state while it is in use or in trouble: owned by its `AccountSession`
/// actor and touched only there. Idle accounts have none (see `AccountSession.activity`).
final class SessionActivity {
    var parsedPDS: URL?
    var cachedSecrets: AccountSecrets?
    var cachedDPoPKey: DPoPKey?
    var refreshInFlight: Task<AccountSecrets, any Error>?
    var identityCheckInFlight: Task<Void, Never>?
    var failedAttempts = 0
    var retryAt: Date?
    var retryReason: String?
    var unsavedSecrets: AccountSecrets?
    var interruptedRefresh: (at: Date, earlierRun: Bool)?
    /// Another host holds the account's refresh lease until then: the schedule looks again at
    /// that time, unless that host's new tokens arrive first.
    var heldElsewhereUntil: Date?

    /// True when nothing here is in use: the session may drop it. The parsed PDS URL and the
    /// DPoP key are caches for calls; without cached tokens the account is not making any.
    var isIdle: Bool {
        cachedSecrets == nil && refreshInFlight == nil
            && identityCheckInFlight == nil && failedAttempts == 0 && retryAt == nil && retryReason == nil
            && unsavedSecrets == nil && interruptedRefresh == nil && heldElsewhereUntil == nil
    }
}
