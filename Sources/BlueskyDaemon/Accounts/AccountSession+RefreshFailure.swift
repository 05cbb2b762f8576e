import BlueskyStore
import Foundation
import XRPC

/// What a failed refresh does to the account. Only a definitive answer ends the session;
/// everything else puts the account in its one backoff, and a store that cannot be written is
/// waited out the same way, never looped on.
extension AccountSession {
    /// Records why a refresh failed and returns the error for the waiting callers. The store
    /// write is best effort: when it fails the outcome holds in memory (and the failure is the
    /// store's outage, shown in the status), and it never escapes as another error.
    func recordFailure(_ error: SessionError, startedAt: Date) async -> DaemonError {
        let outcome: DaemonError
        var updated = record
        switch error {
        case .transient, .noAnswer, .protocolViolation:
            let reason = error.reason
            let delay = enterBackoff(reason: reason, serverAsked: error.serverAskedWait)
            updated.state = .retrying
            updated.stateReason = reason
            logger.warning("refresh failed, will retry", metadata: [
                "outcome": "retrying", "reason": "\(reason)", "retryInSeconds": "\(Int(delay.rounded(.up)))",
            ])
            outcome = .upstreamUnavailable(reason, retryAfter: delay)
        case .expiredToken(let words), .rejected(let words), .authenticationFailed(let words),
             .authFactorTokenRequired(let words):
            let reason = explainEndedSession(words)
            updated.state = .needsLogin
            updated.stateReason = reason
            cachedSecrets = nil
            cachedDPoPKey = nil
            retryAt = nil
            retryReason = nil
            logger.error("session rejected; the account needs a new login", metadata: [
                "outcome": "needs-login", "reason": "\(reason)",
            ])
            outcome = .needsLogin(account: id, reason: reason)
        }
        update(record: updated)
        // No answer: the refresh token's fate is unknown, so the mark stays (a restart then
        // retries at once, within an app password's grace period). Until a refresh succeeds,
        // the lost one explains a replay verdict, and `accounts.list` shows it.
        let answered: Bool
        if case .noAnswer = error {
            answered = false
            if interruptedRefresh == nil { interruptedRefresh = (startedAt, false) }
        } else {
            answered = true
        }
        do {
            let (id, at) = (id, environment.now())
            try await environment.storeCall { [updated] store in
                try store.markState(id: id, state: updated.state, reason: updated.stateReason, at: at, endsRefresh: answered,
                                    ifVersion: updated.secretsVersion)
            }
        } catch StoreError.tokensSuperseded {
            // This failure says nothing of the newer tokens.
            if await adoptTokensStoredMeanwhile() != nil {
                return .upstreamUnavailable("another host refreshed this account meanwhile; try again", retryAfter: nil)
            }
        } catch {
            logger.warning("cannot record the refresh's outcome", metadata: ["error": "\(error)"])
        }
        await environment.reschedule(id, nextRefreshDate())
        return outcome
    }

    /// The store refused a write the refresh needs: the account waits in its backoff, nothing
    /// is sent meanwhile, and the caller learns when the next try is.
    func storeRefused(_ error: any Error, while doing: String) async -> DaemonError {
        let problem = environment.store.health.problem ?? "store unavailable: \(error)"
        let delay = enterBackoff(reason: problem, serverAsked: nil)
        var updated = record
        updated.state = .retrying
        updated.stateReason = problem
        update(record: updated)
        logger.debug("store write failed", metadata: ["while": "\(doing)", "retryInSeconds": "\(Int(delay.rounded(.up)))"])
        await environment.reschedule(id, nextRefreshDate())
        return .upstreamUnavailable(problem, retryAfter: delay)
    }

    /// Starts (or lengthens) the account's backoff; returns the wait in seconds.
    private func enterBackoff(reason: String, serverAsked: TimeInterval?) -> TimeInterval {
        failedAttempts += 1
        let delay = environment.backoff.delay(attempt: failedAttempts, serverAsked: serverAsked)
        retryAt = environment.now().addingTimeInterval(delay)
        retryReason = reason
        return delay
    }

    /// The server's words, prefixed with what happened when a refresh's answer was lost
    /// before: a "refresh token replayed" then means the lost refresh had rotated the token.
    private func explainEndedSession(_ words: String) -> String {
        guard let interrupted = interruptedRefresh else { return words }
        let at = interrupted.at.formatted(.iso8601)
        if interrupted.earlierRun {
            return "the refresh in flight when blueskyd stopped (at \(at)) was lost and the server ended the session: \(words)"
        }
        return "the answer to the refresh sent at \(at) was lost and the server ended the session: \(words)"
    }
}

extension SessionError {
    /// The wait the server asked for, when it did (Retry-After, RateLimit-Reset).
    var serverAskedWait: TimeInterval? {
        if case .transient(_, let after) = self { return after }
        return nil
    }
}
