import AccountStoreCore
import Foundation

/// When an account is next looked after, worked out from its state alone, so that every host
/// that holds the same record works out the same date, and `accounts.list` shows the date the
/// scheduler holds.
extension AccountLifecycle {
    /// The next upkeep of `state`, or nil when it waits for a new login or is being removed.
    static func nextDue(_ state: State, rules: Rules, now: Date) -> (date: Date, isLocal: Bool)? {
        let record = state.record
        guard record.state != .needsLogin, !state.isRemoving else { return nil }
        let trouble = state.trouble
        let date: Date
        var isLocal = false
        if trouble.unsaved != nil {
            // Rotated tokens only this host holds: saved again on its own timer, with backoff.
            date = trouble.retryAt ?? now
            isLocal = true
        } else if let retryAt = trouble.retryAt, retryAt > now {
            date = retryAt
        } else if let held = trouble.heldElsewhereUntil, held > now {
            date = held
        } else if record.refreshStartedAt != nil, trouble.interrupted != nil {
            // A refresh this host left unfinished (it stopped, or the answer was lost): the
            // token may be spent, so the next one goes at once (an app password's grace period
            // saves it).
            date = now
        } else if let warnAt = record.sessionEndWarningAt, let end = record.sessionEndsAt,
                  record.oauth?.clientKind == .oauth2AccessOnly {
            // No refresh token: looked at once ahead of the end (to say so), then at the end.
            date = now < warnAt ? warnAt : end
        } else if let planned = plannedRefresh(of: record, rules: rules) {
            date = planned
        } else {
            return nil
        }
        return (max(date, state.notBefore ?? date), isLocal)
    }

    /// When a refresh of `record` is due, backoff aside; nil when it waits for a new login.
    ///
    /// The lead time is stretched by up to 20 % (at most a third of the token's life), so that
    /// accounts added or refreshed together drift apart instead of falling due in one burst.
    /// The stretch is drawn from the account and its tokens' issue time: the same for every
    /// look at the same tokens, on every host.
    static func plannedRefresh(of record: AccountRecord, rules: Rules) -> Date? {
        refresh(of: record, rules: rules) { Jitter.stretch(of: record.id, issued: $0) }
    }

    /// The earliest a refresh of `record` may be due (the widest stretch): a taken account
    /// whose tokens are younger than that is not due yet, whatever the schedule said.
    static func earliestRefresh(of record: AccountRecord, rules: Rules) -> Date? {
        refresh(of: record, rules: rules) { _ in Jitter.widest }
    }

    /// The refresh date of `record` with its lead time stretched by `stretch(issued)`.
    private static func refresh(of record: AccountRecord, rules: Rules, stretch: (Date) -> Double) -> Date? {
        guard record.state != .needsLogin else { return nil }
        if record.oauth?.clientKind == .oauth2AccessOnly { return record.sessionEndWarningAt }
        let issued = record.lastRefreshAt ?? record.createdAt
        guard let expiry = record.accessExpiresAt else {
            // Opaque token: refresh on a fixed period so the refresh token stays fresh.
            return issued.addingTimeInterval(15 * 60)
        }
        let lifetime = max(0, expiry.timeIntervalSince(issued))
        let ahead = min(rules.refreshAhead.seconds, lifetime / 4)
        return expiry.addingTimeInterval(-min(ahead * stretch(issued), lifetime / 3))
    }

    /// Sets `transition.reschedule` when the due date changed, or when the scheduler must hear
    /// it whatever it is (`always`: an upkeep ended, the account was loaded or signed in
    /// again); never while an upkeep or a refresh is under way (its end decides: a date of
    /// "now" for tokens whose save is on its way would start a second save beside it).
    static func schedule(_ transition: inout Transition, rules: Rules, now: Date, decidedHere: Bool, always: Bool) {
        guard !transition.state.inUpkeep, !transition.state.isRefreshing else { return }
        let next = nextDue(transition.state, rules: rules, now: now)
        let changed = next?.date != transition.state.due || (next?.isLocal ?? false) != transition.state.dueIsLocal
        guard changed || always else { return }
        transition.state.due = next?.date
        transition.state.dueIsLocal = next?.isLocal ?? false
        let version = transition.state.record.secretsVersion
        transition.reschedule = Due(date: next?.date, isLocal: next?.isLocal ?? false, decidedHere: decidedHere,
                                    version: version)
    }
}
