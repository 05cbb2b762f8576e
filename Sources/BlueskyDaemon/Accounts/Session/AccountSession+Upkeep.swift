import AccountStoreCore
import Foundation

/// The scheduler's turn with an account: save tokens the store refused earlier, then refresh
/// when due. The date it comes back at follows from the lifecycle, which tells the scheduler.
extension AccountSession {
    /// Why the scheduler took the account up.
    enum UpkeepCall: Sendable {
        /// Its date in this host's own schedule came.
        case due
        /// Taken from a schedule several hosts share, whose date may be older than the
        /// account's tokens (another host refreshed since): the take handed the row and its
        /// secrets as stored to the session (`AccountManager.adoptTaken`), and the claim checks
        /// the tokens' version again.
        case taken
    }

    func upkeep(_ call: UpkeepCall) async {
        apply(.upkeepBegan)
        // Rotated tokens to save first; then a refresh, if one is due.
        if state.record.state != .needsLogin {
            if state.unsavedSecrets != nil {
                try? await saveUnsavedTokens()
            }
            if state.unsavedSecrets == nil, isRefreshDue() {
                _ = try? await refresh(waitForHolder: false)
            }
        }
        apply(.upkeepEnded(at: environment.now()))
    }

    /// A refresh is due: the mark of an unfinished one, a backoff that ended, or the earliest
    /// date the tokens allow; never during the backoff or while another host holds the lease.
    func isRefreshDue() -> Bool {
        let now = environment.now()
        if backoffRemaining() != nil { return false }
        if let held = state.trouble.heldElsewhereUntil, held > now { return false }
        if state.record.refreshStartedAt != nil || state.trouble.retryAt != nil { return true }
        guard let earliest = AccountLifecycle.earliestRefresh(of: state.record, rules: environment.rules) else { return false }
        return earliest <= now
    }
}
