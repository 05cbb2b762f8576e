import AccountStoreCore
import Foundation
import Testing
import WebBasics
import XRPC
@testable import BlueskyDaemon

/// The account lifecycle as a table: a state and an input give the next state, the store write
/// that records it, and the due date the scheduler is told.
@Suite("The account lifecycle: state × input → state, store write, due date")
struct LifecycleTableTests {
    static let now = Date(timeIntervalSinceReferenceDate: 800_000_000)
    static let rules = AccountLifecycle.Rules(refreshAhead: .seconds(300), backoff: Backoff(initial: .seconds(5), maximum: .seconds(600)))

    static func account(version: Int64 = 3, state: AccountState = .active) -> AccountRecord {
        AccountRecord(id: UUID(uuidString: "9f1c2d3e-0000-4000-8000-000000000001")!, did: "did:plc:alice", handle: "alice.test",
                      handleVerified: true, pds: "https://pds.test", authKind: .appPassword, state: state,
                      createdAt: now.addingTimeInterval(-86400), lastRefreshAt: now.addingTimeInterval(-3600),
                      accessExpiresAt: now.addingTimeInterval(3600), secretsVersion: version)
    }

    static func reduce(_ state: AccountLifecycle.State, _ input: AccountLifecycle.Input) -> AccountLifecycle.Transition {
        AccountLifecycle.reduce(state, input, rules: rules, now: now)
    }

    static let rotated = RotatedSession(did: "did:plc:alice", accessToken: "a2", refreshToken: "r2",
                                        accessExpiresAt: now.addingTimeInterval(7200), refreshExpiresAt: nil)
    static let secrets = AccountSecrets(accessToken: "a2", refreshToken: "r2")

    @Test("a refresh's answer: memory first (new expiries, tokens unsaved), then the save over the version it came from")
    func rotation() {
        let granted = Self.reduce(.init(record: Self.account()), .claimGranted(interruptedAt: nil, at: Self.now)).state
        #expect(granted.trouble.refreshingSince == Self.now)
        let rotated = Self.reduce(granted, .rotated(Self.rotated, secrets: Self.secrets, at: Self.now))
        #expect(rotated.state.record.accessExpiresAt == Self.rotated.accessExpiresAt && rotated.state.record.lastRefreshAt == Self.now)
        #expect(rotated.state.unsavedSecrets == Self.secrets && rotated.state.trouble.refreshingSince == nil)
        #expect(rotated.write == .saveRotated(Self.secrets, accessExpiresAt: Self.rotated.accessExpiresAt, refreshExpiresAt: nil,
                                              scope: nil, handle: nil, at: Self.now, replacing: 3))
        #expect(rotated.reschedule == nil, "the save is on its way: no date until it ends (a date now would start a second save)")
        let saved = Self.reduce(rotated.state, .tokensSaved(version: 4))
        #expect(saved.state.record.secretsVersion == 4 && saved.state.unsavedSecrets == nil && saved.state.trouble == .init())
        #expect(saved.write == nil)
        let due = saved.reschedule
        #expect(due != nil)
        #expect(due?.isLocal == false && due?.decidedHere == true && due?.version == 4)
        #expect(due?.date == AccountLifecycle.plannedRefresh(of: saved.state.record, rules: Self.rules))
    }

    @Test("""
        failures: a transient one backs off and gives the lease back; no answer keeps the mark and says why later; \
        a definitive one needs a login, explained by the lost answer
        """)
    func failures() {
        let start = Self.reduce(.init(record: Self.account()), .claimGranted(interruptedAt: nil, at: Self.now)).state
        let limited = Self.reduce(start, .refreshFailed(.transient("HTTP 429", retryAfter: 120), startedAt: Self.now, at: Self.now))
        #expect(limited.state.record.state == .retrying && limited.state.retryAt == Self.now.addingTimeInterval(120))
        #expect(limited.write == .markState(.retrying, reason: "HTTP 429", lease: .release, ifVersion: 3, at: Self.now))
        #expect(limited.reschedule?.date == Self.now.addingTimeInterval(120), "the server's Retry-After, whole")

        let lost = Self.reduce(start, .refreshFailed(.noAnswer("timed out"), startedAt: Self.now, at: Self.now))
        #expect(lost.write == .markState(.retrying, reason: "timed out", lease: .releaseKeepingMark, ifVersion: 3, at: Self.now))
        #expect(lost.state.trouble.interrupted == .init(at: Self.now, earlierRun: false))
        let replayed = Self.reduce(lost.state, .refreshFailed(.rejected("Refresh token replayed"), startedAt: Self.now, at: Self.now))
        #expect(replayed.state.record.state == .needsLogin && replayed.state.retryAt == nil)
        #expect(replayed.state.record.stateReason?.hasPrefix("the answer to the refresh sent at") == true)
        #expect(replayed.state.record.stateReason?.hasSuffix("the server ended the session: Refresh token replayed") == true)
        #expect(replayed.reschedule == AccountLifecycle.Due(date: nil, isLocal: false, decidedHere: true, version: 3))
    }

    @Test("the store refusing the rotated tokens: kept in memory, retried on this host's own timer with backoff, saved later")
    func saveRefused() {
        let rotated = Self.reduce(.init(record: Self.account()), .rotated(Self.rotated, secrets: Self.secrets, at: Self.now)).state
        let refused = Self.reduce(rotated, .storeRefused(reason: "store unavailable: disk full", at: Self.now))
        #expect(refused.state.unsavedSecrets == Self.secrets && refused.state.record.state == .retrying)
        let due = refused.reschedule
        #expect(due != nil)
        #expect(due?.isLocal == true && due?.date == refused.state.retryAt && due?.date ?? Self.now > Self.now)
        let retry = Self.reduce(refused.state, .retrySave(at: Self.now))
        #expect(retry.write == .saveRotated(Self.secrets, accessExpiresAt: Self.rotated.accessExpiresAt, refreshExpiresAt: nil,
                                            scope: nil, handle: nil, at: Self.now, replacing: 3))
        let saved = Self.reduce(retry.state, .tokensSaved(version: 4))
        #expect(saved.state.record.state == .active && saved.state.trouble == .init())
    }

    @Test("another host's record: older is ignored, newer is taken (but not over unsaved tokens), same version merges")
    func adoption() {
        let current = AccountLifecycle.State(record: Self.account(version: 3))
        var older = Self.account(version: 2)
        older.state = .needsLogin
        #expect(Self.reduce(current, .stored(older)).state.record == current.record, "a stale read changes nothing")

        var newer = Self.account(version: 4)
        newer.lastRefreshAt = Self.now
        newer.accessExpiresAt = Self.now.addingTimeInterval(7200)
        let adopted = Self.reduce(current, .stored(newer))
        #expect(adopted.state.record == newer)
        #expect(adopted.reschedule?.decidedHere == false, "the host that made the change records its date")
        let holding = Self.reduce(current, .rotated(Self.rotated, secrets: Self.secrets, at: Self.now)).state
        #expect(Self.reduce(holding, .stored(newer)).state.unsavedSecrets == Self.secrets, "the save finds the conflict")

        var verdict = Self.account(version: 3)
        verdict.state = .needsLogin
        verdict.stateReason = "revoked"
        verdict.profile = AccountProfile(displayName: "Alice", avatar: nil, description: nil, fetchedAt: Self.now)
        let merged = Self.reduce(current, .stored(verdict)).state.record
        #expect(merged.state == .needsLogin && merged.profile?.displayName == "Alice")
        let refreshing = Self.reduce(current, .claimGranted(interruptedAt: nil, at: Self.now)).state
        #expect(Self.reduce(refreshing, .stored(verdict)).state.record.state == .active,
                "this host's refresh in flight keeps its say over the state")
    }

    @Test("a record whose metadata seal fails: nothing of it is taken, even mid-refresh; the account needs a login")
    func alteredRecord() {
        var rewritten = Self.account(version: 4)
        rewritten.pds = "https://pds.attacker.test"
        let altered = rewritten.markedAltered()
        let refreshing = Self.reduce(.init(record: Self.account()), .claimGranted(interruptedAt: nil, at: Self.now)).state
        for state in [AccountLifecycle.State(record: Self.account()), refreshing] {
            let step = Self.reduce(state, .stored(altered))
            #expect(step.state.record.pds == "https://pds.test" && step.state.record.secretsVersion == 3)
            #expect(step.state.record.state == .needsLogin && step.state.record.stateReason == StoreError.recordAlteredReason)
            #expect(step.state.trouble == .init() && step.note == .recordAltered)
            #expect(step.write == .markState(.needsLogin, reason: StoreError.recordAlteredReason, lease: .keep,
                                             ifVersion: 3, at: Self.now))
            #expect(Self.reduce(step.state, .stored(altered)).write == nil, "said once")
        }
        let holding = Self.reduce(.init(record: Self.account()), .rotated(Self.rotated, secrets: Self.secrets, at: Self.now)).state
        let superseded = Self.reduce(holding, .tokensSuperseded(altered))
        #expect(superseded.state.record.pds == "https://pds.test" && superseded.state.record.state == .needsLogin)
        #expect(superseded.state.unsavedSecrets == nil)
    }

    @Test("requests change only their field: a default, an identity, a profile over a refresh that finished meanwhile")
    func requests() {
        let refreshed = Self.reduce(Self.reduce(.init(record: Self.account()),
                                                .rotated(Self.rotated, secrets: Self.secrets, at: Self.now)).state,
                                    .tokensSaved(version: 4)).state
        let defaulted = Self.reduce(refreshed, .defaultChanged(true, at: Self.now)).state
        #expect(defaulted.record.isDefault && defaulted.record.secretsVersion == 4
                    && defaulted.record.accessExpiresAt == Self.rotated.accessExpiresAt)
        let moved = Self.reduce(defaulted, .identityResolved(handle: "new.test", verified: true, pds: "https://pds2.test",
                                                             at: Self.now)).state
        #expect(moved.record.pds == "https://pds2.test" && moved.record.handle == "new.test" && moved.record.secretsVersion == 4)
        #expect(Self.reduce(moved, .movedAway(reason: "moved", version: 3, at: Self.now)).state.record.state == .active,
                "a move verdict over older tokens changes nothing")
        #expect(Self.reduce(moved, .movedAway(reason: "moved", version: 4, at: Self.now)).state.record.state == .needsLogin)
    }

    @Test("a login in place keeps the account's own fields and clears every trouble")
    func signedIn() {
        var current = AccountLifecycle.State(record: Self.account())
        current.record.isDefault = true
        current = Self.reduce(current, .refreshFailed(.transient("x", retryAfter: nil), startedAt: Self.now, at: Self.now)).state
        var session = Self.account(version: 9, state: .active)
        session.authKind = .oauth
        session.isDefault = false
        session.createdAt = Self.now
        let after = Self.reduce(current, .signedIn(session))
        #expect(after.state.record.isDefault && after.state.record.createdAt == current.record.createdAt)
        #expect(after.state.record.authKind == .oauth && after.state.record.secretsVersion == 9 && after.state.trouble == .init())
        #expect(after.newSession)
    }

    @Test("the due date: a passed backoff is ignored; an upkeep decides at its end, not again within a second")
    func dueDates() {
        var state = AccountLifecycle.State(record: Self.account())
        state = Self.reduce(state, .refreshFailed(.transient("x", retryAfter: nil), startedAt: Self.now, at: Self.now))
            .state
        let later = AccountLifecycle.reduce(state, .retimed, rules: Self.rules, now: Self.now.addingTimeInterval(1000))
        #expect(later.state.due == AccountLifecycle.plannedRefresh(of: state.record, rules: Self.rules),
                "a backoff that has passed no longer sets the date")
        let begun = Self.reduce(state, .upkeepBegan)
        #expect(begun.state.due == nil && begun.reschedule == nil)
        #expect(Self.reduce(begun.state, .defaultChanged(true, at: Self.now)).reschedule == nil, "decided when the upkeep ends")
        var past = Self.account()
        past.accessExpiresAt = Self.now.addingTimeInterval(-10)
        let ended = Self.reduce(.init(record: past), .upkeepEnded(at: Self.now))
        #expect(ended.reschedule?.date == Self.now.addingTimeInterval(AccountLifecycle.minimumUpkeepInterval))
    }

    @Test("""
        a removal is an input: the account is never due again, whatever comes after (the refresh in flight ending, \
        another host's record, a retiming); a refresh under way still ends and saves what it rotated
        """)
    func removal() {
        let idle = Self.reduce(.init(record: Self.account()), .removalBegan)
        #expect(idle.state.isRemoving && idle.state.due == nil)
        #expect(idle.reschedule == Due(date: nil, isLocal: false, decidedHere: true, version: 3), "taken off the schedule")
        for input: AccountLifecycle.Input in [.retimed, .upkeepEnded(at: Self.now), .stored(Self.account(version: 5)),
                                              .defaultChanged(true, at: Self.now)] {
            let after = Self.reduce(idle.state, input)
            #expect(after.state.isRemoving && after.state.due == nil && after.reschedule?.date == nil, "\(input)")
        }
        // Mid-refresh: the rotated tokens are still saved (the logout revokes them), and no
        // date follows the save.
        let granted = Self.reduce(.init(record: Self.account()), .claimGranted(interruptedAt: nil, at: Self.now)).state
        let removing = Self.reduce(granted, .removalBegan)
        #expect(removing.reschedule == nil, "the refresh in flight decides nothing either")
        let rotated = Self.reduce(removing.state, .rotated(Self.rotated, secrets: Self.secrets, at: Self.now))
        #expect(rotated.write != nil && rotated.state.unsavedSecrets == Self.secrets)
        let saved = Self.reduce(rotated.state, .tokensSaved(version: 4))
        #expect(saved.state.unsavedSecrets == nil && saved.state.due == nil)
        #expect(saved.reschedule == nil || saved.reschedule?.date == nil)
    }

    typealias Due = AccountLifecycle.Due

    @Test("the stretch of the lead time is the same for the same tokens and within 20 %")
    func stretch() {
        let record = Self.account()
        let planned = AccountLifecycle.plannedRefresh(of: record, rules: Self.rules)
        #expect(planned == AccountLifecycle.plannedRefresh(of: record, rules: Self.rules))
        let expiry = record.accessExpiresAt!
        let lead = expiry.timeIntervalSince(planned!)
        #expect(lead >= 300 && lead < 360)
        var other = record
        other.id = UUID()
        #expect(AccountLifecycle.plannedRefresh(of: other, rules: Self.rules) != planned, "accounts drift apart")
    }
}
