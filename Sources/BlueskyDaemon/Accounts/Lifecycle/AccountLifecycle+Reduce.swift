import AccountStoreCore
import Foundation
import XRPC

extension AccountLifecycle {
    /// Applies `input` to `state`: the next state, the write recording it, the new due date.
    /// Pure but for the backoff's jitter: it reads no clock, store or network of its own.
    static func reduce(_ state: State, _ input: Input, rules: Rules, now: Date) -> Transition {
        let input = distrustingAltered(input, now: now)
        var next = state
        var write: StoreWrite?
        var note: Note?
        var newSession = false
        var decidedHere = true
        switch input {
        case .loaded(let interrupted):
            // The date follows from what the store holds: no decision of this host's.
            decidedHere = false
            if interrupted, let mark = next.record.refreshStartedAt, next.record.state != .needsLogin {
                next.trouble.interrupted = Interruption(at: mark, earlierRun: true)
            }
        case .upkeepBegan:
            next.inUpkeep = true
            next.due = nil
        case .upkeepEnded(let at):
            next.inUpkeep = false
            next.notBefore = at.addingTimeInterval(minimumUpkeepInterval)
        case .claimGranted(let interruptedAt, let at):
            next.trouble.heldElsewhereUntil = nil
            next.trouble.refreshingSince = at
            if let interruptedAt, next.trouble.interrupted == nil {
                next.trouble.interrupted = Interruption(at: interruptedAt, earlierRun: true)
            }
        case .heldElsewhere(let until):
            next.trouble.heldElsewhereUntil = until
            next.trouble.refreshingSince = nil
        case .rotated(let session, let secrets, let at):
            (write, note) = rotated(&next, session, secrets, at: at)
        case .retrySave(let at):
            if let unsaved = next.trouble.unsaved, !next.trouble.saving {
                next.trouble.saving = true
                let record = next.record
                write = .saveRotated(unsaved, accessExpiresAt: record.accessExpiresAt, refreshExpiresAt: record.refreshExpiresAt,
                                     scope: record.oauth?.scope, handle: record.handleVerified ? nil : record.handle,
                                     at: record.lastRefreshAt ?? at, replacing: record.secretsVersion)
            }
        case .tokensSaved(let version):
            // A login that replaced the session while the save was out stands: its tokens are
            // newer than the ones just saved.
            guard next.trouble.unsaved != nil else { break }
            next.trouble.unsaved = nil
            next.trouble.saving = false
            next.record.secretsVersion = version
            // As the store's save sets it: the server just accepted the session. A verdict
            // recorded over the older tokens meanwhile (a move) applied to those alone.
            next.record.state = .active
            next.record.stateReason = nil
            clearBackoff(&next)
        case .tokensSuperseded(let stored):
            next.trouble.unsaved = nil
            next.trouble.saving = false
            decidedHere = false
            if let stored { _ = adopt(&next, stored) }
            note = .savedOverByAnotherHost
        case .storeRefused(let reason, let at):
            next.trouble.refreshingSince = nil
            next.trouble.saving = false
            let delay = enterBackoff(&next, reason: reason, serverAsked: nil, rules: rules, at: at)
            next.record.state = .retrying
            next.record.stateReason = reason
            note = next.trouble.unsaved != nil ? .saveRefused(reason: reason, delay: delay) : .retrying(reason: reason, delay: delay)
        case .refreshFailed(let error, let startedAt, let at):
            (write, note) = failed(&next, error, startedAt: startedAt, at: at, rules: rules)
        case .refreshAbandoned:
            next.trouble.refreshingSince = nil
        case .stored(let stored):
            decidedHere = false
            note = adopt(&next, stored)
        case .signedIn(let session):
            newSession = true
            var record = session
            record.id = next.record.id
            record.createdAt = next.record.createdAt
            record.isDefault = next.record.isDefault
            record.profile = next.record.profile
            next.record = record
            next.trouble = Trouble()
        case .identityResolved(let handle, let verified, let pds, let at):
            next.record.handle = handle
            next.record.handleVerified = verified
            if let pds { next.record.pds = pds }
            next.record.updatedAt = at
        case .movedAway(let reason, let version, let at):
            guard next.record.secretsVersion == version, next.record.state != .needsLogin else { break }
            next.record.state = .needsLogin
            next.record.stateReason = reason
            next.record.updatedAt = at
            clearBackoff(&next)
            note = .movedAway(reason: reason)
        case .recordAltered(let at, let check):
            guard !next.record.isAltered || next.record.alteredCheck != check else { break }
            next.record = next.record.markedAltered(check)
            next.record.updatedAt = at
            next.trouble = Trouble()
            write = .markState(.needsLogin, reason: StoreError.recordAlteredReason, lease: .keep,
                               ifVersion: next.record.secretsVersion, at: at)
            note = .recordAltered
        case .profileFetched(let profile):
            next.record.profile = profile
        case .defaultChanged(let isDefault, let at):
            guard next.record.isDefault != isDefault else { break }
            next.record.isDefault = isDefault
            next.record.updatedAt = at
        case .retimed:
            break
        case .removalBegan:
            next.isRemoving = true
        }
        // The store stamps the row it writes with the write's date; so does memory.
        switch write {
        case .saveRotated(_, _, _, _, _, let at, _)?, .markState(_, _, _, _, let at)?: next.record.updatedAt = at
        case nil: break
        }
        var transition = Transition(state: next, write: write, reschedule: nil, newSession: newSession, note: note)
        let always: Bool = switch input {
        case .loaded, .upkeepEnded, .signedIn, .retimed, .removalBegan: true
        default: false
        }
        schedule(&transition, rules: rules, now: now, decidedHere: decidedHere, always: always)
        return transition
    }

    /// A record read back whose metadata seal fails was rewritten outside blueskyd: none of it
    /// is taken (its PDS or endpoints could be anyone's); the account needs a new login.
    private static func distrustingAltered(_ input: Input, now: Date) -> Input {
        switch input {
        case .stored(let stored) where stored.isAltered: .recordAltered(at: now, check: stored.alteredCheck)
        case .tokensSuperseded(let stored?) where stored.isAltered: .recordAltered(at: now, check: stored.alteredCheck)
        default: input
        }
    }

    /// An account is never taken up again sooner than this after its last upkeep ended.
    static let minimumUpkeepInterval: TimeInterval = 1

    // MARK: - Refresh outcomes

    private static func rotated(_ state: inout State, _ session: RotatedSession, _ secrets: AccountSecrets,
                                at: Date) -> (StoreWrite, Note) {
        let old = state.record
        state.record.accessExpiresAt = session.accessExpiresAt
        state.record.refreshExpiresAt = session.refreshExpiresAt
        state.record.lastRefreshAt = at
        state.record.refreshStartedAt = nil
        state.record.state = .active
        state.record.stateReason = nil
        // Only a changed grant makes a new copy of the OAuth facts (a narrowed scope is rare).
        if let scope = session.scope, scope != old.oauth?.scope { state.record.oauth?.scope = scope }
        var renamed: String?
        if let handle = session.handle, handle != old.handle {
            // The PDS's word alone does not make a handle ours: it stays unverified (and is not
            // looked up by) until the identity recheck verifies it both ways.
            state.record.handle = handle
            state.record.handleVerified = false
            renamed = handle
        }
        state.trouble.interrupted = nil
        state.trouble.refreshingSince = nil
        state.trouble.unsaved = secrets
        state.trouble.saving = true
        let scope = state.record.oauth?.scope != old.oauth?.scope ? state.record.oauth?.scope : nil
        return (.saveRotated(secrets, accessExpiresAt: session.accessExpiresAt, refreshExpiresAt: session.refreshExpiresAt,
                             scope: scope, handle: renamed, at: at, replacing: old.secretsVersion), .refreshed(renamedTo: renamed))
    }

    /// Only a definitive answer ends the session; everything else puts the account in its one
    /// backoff. No answer leaves the mark (the token's fate is unknown) but gives the lease back.
    private static func failed(_ state: inout State, _ error: SessionError, startedAt: Date, at: Date,
                               rules: Rules) -> (StoreWrite, Note) {
        state.trouble.refreshingSince = nil
        let version = state.record.secretsVersion
        switch error {
        case .transient, .noAnswer, .protocolViolation:
            let reason = error.reason
            let delay = enterBackoff(&state, reason: reason, serverAsked: error.serverAskedWait, rules: rules, at: at)
            state.record.state = .retrying
            state.record.stateReason = reason
            var lease = LeaseRelease.release
            if case .noAnswer = error {
                lease = .releaseKeepingMark
                if state.trouble.interrupted == nil { state.trouble.interrupted = Interruption(at: startedAt, earlierRun: false) }
            }
            return (.markState(.retrying, reason: reason, lease: lease, ifVersion: version, at: at),
                    .retrying(reason: reason, delay: delay))
        case .expiredToken(let words), .rejected(let words), .authenticationFailed(let words), .authFactorTokenRequired(let words):
            let reason = explainEndedSession(words, interrupted: state.trouble.interrupted)
            state.record.state = .needsLogin
            state.record.stateReason = reason
            clearBackoff(&state)
            return (.markState(.needsLogin, reason: reason, lease: .release, ifVersion: version, at: at), .needsLogin(reason: reason))
        }
    }

    /// The server's words, prefixed with what happened when a refresh's answer was lost
    /// before: a "refresh token replayed" then means the lost refresh had rotated the token.
    static func explainEndedSession(_ words: String, interrupted: Interruption?) -> String {
        guard let interrupted else { return words }
        let at = interrupted.at.formatted(.iso8601)
        if interrupted.earlierRun {
            return "the refresh in flight when blueskyd stopped (at \(at)) was lost and the server ended the session: \(words)"
        }
        return "the answer to the refresh sent at \(at) was lost and the server ended the session: \(words)"
    }

    /// Starts (or lengthens) the account's backoff; returns the wait in seconds.
    private static func enterBackoff(_ state: inout State, reason: String, serverAsked: TimeInterval?, rules: Rules,
                                     at: Date) -> TimeInterval {
        var trouble = state.trouble
        trouble.failedAttempts += 1
        let delay = rules.backoff.delay(attempt: trouble.failedAttempts, serverAsked: serverAsked)
        trouble.retryAt = at.addingTimeInterval(delay)
        trouble.retryReason = reason
        state.trouble = trouble
        return delay
    }

    private static func clearBackoff(_ state: inout State) {
        var trouble = state.trouble
        trouble.failedAttempts = 0
        trouble.retryAt = nil
        trouble.retryReason = nil
        state.trouble = trouble
    }

    // MARK: - Another host's change

    /// Takes the account as the store holds it, by the tokens' version: an older read is stale
    /// and changes nothing; newer tokens are the account's (unless this host holds rotated
    /// tokens not saved yet: their save finds the conflict and adopts then); for the same
    /// tokens, what other hosts may change (state, identity, profile, default, the mark) is
    /// taken, and this host's own refresh in flight keeps its say over the state.
    private static func adopt(_ state: inout State, _ stored: AccountRecord) -> Note? {
        let current = state.record
        if stored.secretsVersion > current.secretsVersion {
            guard state.trouble.unsaved == nil else { return nil }
            state.record = stored
            var trouble = state.trouble
            trouble.interrupted = nil
            trouble.heldElsewhereUntil = nil
            if stored.state != .retrying {
                // New good tokens, or a verdict only a login changes: no backoff is left to wait out.
                trouble.failedAttempts = 0
                trouble.retryAt = nil
                trouble.retryReason = nil
            }
            state.trouble = trouble
            return .adoptedNewerTokens
        }
        guard stored.secretsVersion == current.secretsVersion else { return nil }
        var merged = current
        merged.handle = stored.handle
        merged.handleVerified = stored.handleVerified
        merged.pds = stored.pds
        merged.profile = stored.profile
        merged.isDefault = stored.isDefault
        if let scope = stored.oauth?.scope { merged.oauth?.scope = scope }
        if state.trouble.unsaved == nil, state.trouble.refreshingSince == nil {
            merged.state = stored.state
            merged.stateReason = stored.stateReason
            merged.refreshStartedAt = stored.refreshStartedAt
            if stored.state == .needsLogin { clearBackoff(&state) }
        }
        merged.updatedAt = max(current.updatedAt, stored.updatedAt)
        state.record = merged
        return nil
    }
}

extension SessionError {
    /// The wait the server asked for, when it did (Retry-After, RateLimit-Reset).
    var serverAskedWait: TimeInterval? {
        if case .transient(_, let after) = self { return after }
        return nil
    }
}
