import AccountStoreCore
import Foundation
import WebBasics
import XRPC

/// Everything that can happen to an account, as one pure function: an input applied to the
/// account's *current* state gives its next state, the store write that records it (if the
/// input is a fact the store has not seen yet), and when it is next due.
///
/// The account's owner (`AccountSession`) is the only caller: it applies each input on its
/// actor, with no suspension between reading the state and replacing it, then performs what
/// the transition asks. Whether memory or the store goes first is decided here once per kind of
/// input, not at each call site:
/// - *facts* the daemon learns itself (a refresh's outcome, its rotated tokens) change memory
///   first and carry the write that records them (`Transition.write`), whose result is the
///   next input;
/// - *requests* (a default, an identity, a move, a profile, a login) are written to the store
///   by their caller first, and applied here only once the store agreed, as the change alone
///   (never a whole record copied before the write).
enum AccountLifecycle {
    /// What decides an account's dates besides its own state.
    struct Rules: Sendable, Equatable {
        var refreshAhead: Duration
        var backoff: Backoff
    }

    /// An account's state. Small for the idle majority (the record, two dates, a flag and one
    /// pointer): what only a troubled or busy account needs sits behind `trouble`.
    struct State: Sendable, Equatable {
        var record: AccountRecord
        // The flags come right after the record, whose last bytes are one-byte fields: they fill
        // the rest of its last word instead of a word each after the dates (200 → 184 bytes a
        // state, and a session's allocation 368 → 352).
        /// The scheduler's upkeep of the account is under way: the next date is decided when it ends.
        var inUpkeep = false
        /// Whether `due` is the host's own timer (a save of rotated tokens it alone holds), which
        /// a shared schedule does not keep.
        var dueIsLocal = false
        /// The account is being removed (its logout began): it is never due again, and no
        /// refresh starts, so that what the logout revokes is the newest token.
        var isRemoving = false
        /// When the scheduler holds the account next; nil while unscheduled (waiting for a
        /// login) or being looked after. What `accounts.list` shows as `nextRefreshAt`.
        var due: Date? {
            get { dueSeconds.isNaN ? nil : Date(timeIntervalSinceReferenceDate: dueSeconds) }
            set { dueSeconds = newValue?.timeIntervalSinceReferenceDate ?? .nan }
        }
        private var dueSeconds: Double = .nan
        /// No upkeep starts again before this (its last one ended a second before it): no
        /// answer, however odd, makes the schedule spin on an account.
        var notBefore: Date? {
            get { notBeforeSeconds.isNaN ? nil : Date(timeIntervalSinceReferenceDate: notBeforeSeconds) }
            set { notBeforeSeconds = newValue?.timeIntervalSinceReferenceDate ?? .nan }
        }
        private var notBeforeSeconds: Double = .nan
        private var troubleBox: TroubleBox?

        init(record: AccountRecord) {
            self.record = record
        }

        /// Backoff, unsaved tokens, a refresh in flight or held elsewhere; `.none` when idle.
        var trouble: Trouble {
            get { troubleBox?.trouble ?? Trouble() }
            set { troubleBox = newValue == Trouble() ? nil : TroubleBox(newValue) }
        }

        var unsavedSecrets: AccountSecrets? { troubleBox?.trouble.unsaved }
        /// A refresh of this host's is under way: its request is out, or its rotated tokens are
        /// on their way to the store.
        var isRefreshing: Bool {
            guard let trouble = troubleBox?.trouble else { return false }
            return trouble.refreshingSince != nil || trouble.saving
        }
        var retryAt: Date? { troubleBox?.trouble.retryAt }
    }

    /// What a busy or troubled account carries besides its record.
    struct Trouble: Sendable, Equatable {
        /// Consecutive failures, for the backoff.
        var failedAttempts = 0
        /// The account's one backoff: until then no refresh request leaves, whoever asks.
        var retryAt: Date?
        /// Why the account waits (the last failure), for callers turned away meanwhile.
        var retryReason: String?
        /// A refresh whose outcome is unknown (blueskyd stopped, or the answer was lost): when
        /// it was sent, and whether by an earlier run. Explains a later "refresh token replayed".
        var interrupted: Interruption?
        /// Another host holds the refresh lease until then.
        var heldElsewhereUntil: Date?
        /// Tokens the server rotated that the store has not saved yet: used for calls, saved again
        /// with backoff, and never replaced by another refresh before they are on disk.
        var unsaved: AccountSecrets?
        /// A save of `unsaved` is on its way to the store: no second one starts beside it.
        var saving = false
        /// This host's refresh request is out (since then).
        var refreshingSince: Date?
    }

    struct Interruption: Sendable, Equatable {
        var at: Date
        var earlierRun: Bool
    }

    /// One thing that happened to the account.
    enum Input: Sendable {
        /// Loaded at start; `interrupted`: its write-ahead mark is this host's own, left by a
        /// run that stopped mid-refresh.
        case loaded(interrupted: Bool)
        /// The scheduler took the account up, or finished with it.
        case upkeepBegan
        case upkeepEnded(at: Date)
        /// This host holds the refresh lease; the request may leave.
        case claimGranted(interruptedAt: Date?, at: Date)
        /// Another host holds the refresh lease until `until`.
        case heldElsewhere(until: Date)
        /// The server rotated the tokens: they are used now and saved next.
        case rotated(RotatedSession, secrets: AccountSecrets, at: Date)
        /// The rotated tokens the store refused are to be saved again now.
        case retrySave(at: Date)
        /// The rotated tokens are on disk, as version `version`.
        case tokensSaved(version: Int64)
        /// Another host's tokens were stored over the version the rotated ones came from (this
        /// host's lease had run out): they win, and these are dropped. The account as stored,
        /// when it could be read.
        case tokensSuperseded(AccountRecord?)
        /// The store refused a write the refresh needs (`unsaved`: the rotated tokens' save).
        case storeRefused(reason: String, at: Date)
        /// The refresh request failed: the server's verdict, or no answer.
        case refreshFailed(SessionError, startedAt: Date, at: Date)
        /// The refresh's answer no longer applies (newer tokens arrived while it was out).
        case refreshAbandoned
        /// The account as the store holds it (another host's change, or newer tokens found).
        case stored(AccountRecord)
        /// A login replaced the session in the store (same account).
        case signedIn(AccountRecord)
        /// The DID document's handle (and whether verified) and, when it moved, the PDS: saved.
        case identityResolved(handle: String?, verified: Bool, pds: String?, at: Date)
        /// The session cannot follow the account to its new PDS: recorded over `version`.
        case movedAway(reason: String, version: Int64, at: Date)
        /// The account's row was rewritten by someone without the store key: its tokens go
        /// nowhere until a new login.
        case recordAltered(at: Date, check: AccountSealCheck = .tampered)
        case profileFetched(AccountProfile?)
        case defaultChanged(Bool, at: Date)
        /// The rules changed (a reload): the date is worked out again.
        case retimed
        /// A logout began: the account's last input but for the refresh in flight, if any,
        /// which ends first (its rotated tokens are what the logout revokes).
        case removalBegan
    }

    /// What applying an input asks of the account's owner.
    struct Transition: Sendable {
        var state: State
        /// The store write recording the input, when memory went first.
        var write: StoreWrite?
        /// When the scheduler should look again; nil when that did not change.
        var reschedule: Due?
        /// Whether the change is a new login's (its own `login.completed` says so).
        var newSession = false
        /// What happened, for the log.
        var note: Note?
    }

    /// A due date as the scheduler is told it.
    struct Due: Sendable, Equatable {
        /// nil: never (the account waits for a new login).
        var date: Date?
        /// The host's own timer (saving tokens only it holds), never the shared schedule's.
        var isLocal: Bool
        /// Decided by this host (not taken over from another host's change).
        var decidedHere: Bool
        /// The tokens' version it was decided for (a shared schedule fences on it).
        var version: Int64
    }

    /// What a transition means, in the words the log uses.
    enum Note: Sendable, Equatable {
        case refreshed(renamedTo: String?)
        case retrying(reason: String, delay: TimeInterval)
        case needsLogin(reason: String)
        case saveRefused(reason: String, delay: TimeInterval)
        case adoptedNewerTokens
        case savedOverByAnotherHost
        case movedAway(reason: String)
        case recordAltered
    }
}

/// The immutable box behind `State.trouble` (a change makes a new box).
final class TroubleBox: Sendable {
    let trouble: AccountLifecycle.Trouble
    init(_ trouble: AccountLifecycle.Trouble) { self.trouble = trouble }
}

extension AccountLifecycle.State {
    static func == (a: Self, b: Self) -> Bool {
        a.record == b.record && a.due == b.due && a.inUpkeep == b.inUpkeep && a.dueIsLocal == b.dueIsLocal
            && a.notBefore == b.notBefore && a.isRemoving == b.isRemoving && a.trouble == b.trouble
    }
}

/// A store write a transition asks for; its result is the next input.
enum StoreWrite: Sendable, Equatable {
    /// The rotated tokens, over the version they were refreshed from, with what else the
    /// answer changed (a scope, an unverified handle; nil: unchanged).
    case saveRotated(AccountSecrets, accessExpiresAt: Date?, refreshExpiresAt: Date?, scope: String?, handle: String?,
                     at: Date, replacing: Int64)
    /// A refresh's outcome, over the version it was sent with.
    case markState(AccountState, reason: String?, lease: LeaseRelease, ifVersion: Int64, at: Date)
}

/// The new tokens of a refresh, whichever way the account signs in.
struct RotatedSession: Sendable, Equatable {
    var did: String
    var accessToken: String
    var refreshToken: String
    var accessExpiresAt: Date?
    var refreshExpiresAt: Date?
    var handle: String?
    /// The scope granted (OAuth).
    var scope: String?
}
