import AccountStoreCore
import DPoP
import Foundation
import Logging
import XRPC

/// The one owner of an account: its state, its tokens and its refreshes.
///
/// Every change to the account is an `AccountLifecycle.Input` applied here (`apply`) to the
/// state as it is at that moment, with no suspension between reading the state and replacing it.
/// What follows a change (the registry's indexes, the census, the events, the schedule, the log)
/// fans out from that one place. At most one refresh runs at a time; every caller that needs a
/// fresh token meanwhile waits for that one. Idle accounts keep no token in memory.
actor AccountSession {
    nonisolated let id: UUID
    private(set) var state: AccountLifecycle.State
    let environment: SessionEnvironment
    /// When the DID document was last looked at again (handle and PDS changes).
    var identityCheckedAt: Date? {
        get { identityCheckedSeconds.isNaN ? nil : Date(timeIntervalSinceReferenceDate: identityCheckedSeconds) }
        set { identityCheckedSeconds = newValue?.timeIntervalSinceReferenceDate ?? .nan }
    }
    /// `identityCheckedAt` as seconds (NaN: never): 8 bytes, not an optional's 16.
    private var identityCheckedSeconds: Double
    /// The 48-hour warning before a public OAuth session ends was logged (once per run).
    var warnedSessionEnd = false
    /// What only an account in use needs (decrypted tokens, a refresh in flight, a parsed PDS
    /// URL); nil for the idle majority, which then carry one pointer instead of it all.
    private var activity: SessionActivity?

    /// A session for `record`, as loaded or just added: its first date goes to the scheduler
    /// now (as the store implies it, not as a new decision of this host's).
    /// - Parameters:
    ///   - identityCheckedAt: when the DID document was last read (nil: never, so a check is due).
    ///   - interrupted: the record's write-ahead mark was left by this host's earlier run.
    init(record: AccountRecord, environment: SessionEnvironment, identityCheckedAt: Date? = nil, interrupted: Bool = false) {
        var due: AccountLifecycle.Due?
        self.init(loading: record, environment: environment, identityCheckedAt: identityCheckedAt, interrupted: interrupted,
                  firstDue: &due)
        if let due { environment.schedule(record.id, due, record.refreshServer) }
    }

    /// The same, for a start that hands every first date to the scheduler at once
    /// (`RefreshScheduler.takeIn(firstDates:)`): the date is left in `firstDue` instead.
    init(loading record: AccountRecord, environment: SessionEnvironment, identityCheckedAt: Date?, interrupted: Bool,
         firstDue: inout AccountLifecycle.Due?) {
        self.id = record.id
        let loaded = AccountLifecycle.reduce(AccountLifecycle.State(record: record), .loaded(interrupted: interrupted),
                                             rules: environment.rules, now: environment.now())
        self.state = loaded.state
        self.environment = environment
        self.identityCheckedSeconds = identityCheckedAt?.timeIntervalSinceReferenceDate ?? .nan
        firstDue = loaded.reschedule
    }

    var record: AccountRecord { state.record }

    // MARK: - The one mutator

    /// Applies `input` to the current state and fans the change out: the registry's indexes and
    /// the census follow the record, its events are published, the scheduler hears the new due
    /// date, the log says what happened. Returns the store write the transition asks for.
    @discardableResult
    func apply(_ input: AccountLifecycle.Input) -> StoreWrite? {
        let old = state
        let transition = AccountLifecycle.reduce(old, input, rules: environment.rules, now: environment.now())
        // What calls read off the actor must not outlive the state it came from.
        withdrawCallTarget()
        state = transition.state
        if state.record.pds != old.record.pds { activity?.parsedPDS = nil }
        if (state.unsavedSecrets == nil) != (old.unsavedSecrets == nil) {
            let holds = state.unsavedSecrets != nil
            environment.unsaved.withLock { unsaved in
                if holds { unsaved.insert(id) } else { unsaved.remove(id) }
            }
        }
        recordDidChange(from: old.record, newSession: transition.newSession)
        if let due = transition.reschedule { environment.schedule(id, due, state.record.refreshServer) }
        if let note = transition.note {
            log(note)
            environment.metrics?.noted(note, kind: state.record.authKind)
        }
        releaseActivityIfIdle()
        return transition.write
    }

    /// Applies `input`, then performs each store write a transition asks for and applies its
    /// result, until none is left. Returns the last input applied: how the writes ended.
    @discardableResult
    func drive(_ input: AccountLifecycle.Input) async -> AccountLifecycle.Input {
        var last = input
        var write = apply(input)
        while let pending = write {
            active.storeWritesInFlight += 1
            let result = await perform(pending)
            active.storeWritesInFlight -= 1
            guard let result else { break }
            last = result
            write = apply(result)
        }
        await readAgainIfAsked()
        return last
    }

    /// Takes a record read from the store (another host's change, or a look after a claim).
    /// One of the same tokens' version read while this host's own write is out may predate
    /// that write (a NOTIFY of an older change read just before it committed): it is not
    /// taken, and the account is read again once the write is done.
    func adoptStored(_ stored: AccountRecord) {
        if stored.secretsVersion == state.record.secretsVersion, let activity, activity.storeWritesInFlight > 0 {
            activity.readAgainAfterWrites = true
            return
        }
        apply(.stored(stored))
    }

    /// An account the shared schedule's take handed to this host: its row, as `adoptStored`,
    /// and its secrets, kept for the refresh that follows while they are still the tokens this
    /// session holds (the take read both at one version). The refresh then reads nothing
    /// before its claim.
    func adoptTaken(_ taken: TakenAccount) {
        adoptStored(taken.record)
        guard let secrets = taken.secrets, state.unsavedSecrets == nil, cachedSecrets == nil,
              state.record.secretsVersion == taken.record.secretsVersion else { return }
        cache(secrets, version: taken.record.secretsVersion)
    }

    /// The read `adoptStored` put off, once no write of this host's is out.
    private func readAgainIfAsked() async {
        while let activity, activity.readAgainAfterWrites, activity.storeWritesInFlight == 0 {
            activity.readAgainAfterWrites = false
            guard let stored = try? await environment.store.account(id: id) else { return }
            adoptStored(stored)
        }
    }

    // MARK: - Activity (caches and tasks of an account in use)

    /// The activity state, made on first use.
    private var active: SessionActivity {
        if let activity { return activity }
        let made = SessionActivity()
        activity = made
        return made
    }

    /// Drops the activity state once nothing in it is in use, so that an account that was
    /// refreshed or retried goes back to an idle account's size.
    func releaseActivityIfIdle() {
        if let activity, activity.isIdle { self.activity = nil }
    }

    /// Decrypted tokens of the version they were read at, kept while the account makes calls.
    var cachedSecrets: AccountSecrets? {
        guard let cached = activity?.cachedSecrets, cached.version == state.record.secretsVersion else { return nil }
        return cached.secrets
    }

    func cache(_ secrets: AccountSecrets, version: Int64) {
        active.cachedSecrets = (version, secrets)
    }

    var refreshInFlight: Task<AccountSecrets, any Error>? {
        get { activity?.refreshInFlight }
        set { if newValue != nil || activity != nil { active.refreshInFlight = newValue } }
    }

    var identityCheckInFlight: Task<Void, Never>? {
        get { activity?.identityCheckInFlight }
        set { if newValue != nil || activity != nil { active.identityCheckInFlight = newValue } }
    }

    var logger: Logger {
        var logger = environment.logger
        logger[metadataKey: "account"] = "\(id.uuidString.lowercased())"
        logger[metadataKey: "did"] = "\(state.record.did)"
        return logger
    }

    // MARK: - Calls

    /// How a call proves who it is: a bearer token, or a DPoP-bound token and its key.
    enum CallCredentials: Sendable {
        case bearer(String)
        case dpop(token: String, key: DPoPKey, did: String)

        var token: String {
            switch self {
            case .bearer(let token), .dpop(let token, _, _): token
            }
        }
    }

    /// Publishes what a call needs, from the state as it is now, so that the next calls read it
    /// without a hop here (`LiveCallTargets`): only with the current version's tokens, saved,
    /// and an access token whose expiry is known.
    func publishCallTarget(_ credentials: CallCredentials, server: URL) {
        guard state.unsavedSecrets == nil, let secrets = cachedSecrets, secrets.accessToken == credentials.token,
              let expiry = state.record.accessExpiresAt, state.record.state != .needsLogin, !state.isRemoving else { return }
        let published = environment.liveTargets.publish(
            LiveCallTargets.Target(credentials: credentials, server: server, isOAuth2: state.record.authKind == .oauth2,
                                   refreshable: state.record.oauth?.clientKind == .oauth2,
                                   usableUntil: expiry.addingTimeInterval(-1), owner: ObjectIdentifier(self)),
            for: id, if: { environment.registry.holds(self) })
        if published { active.publishedCallTarget = true }
    }

    private func withdrawCallTarget() {
        guard let activity, activity.publishedCallTarget else { return }
        environment.liveTargets.withdraw(id, owner: self)
        activity.publishedCallTarget = false
    }

    /// What a proxied call needs: read where the call runs while the session has it published
    /// (tokens live), otherwise from the session, which refreshes first when needed.
    nonisolated func liveCallTarget() async throws(DaemonError) -> (credentials: CallCredentials, pds: URL) {
        if let target = environment.liveTargets.target(id, owner: self, now: environment.now()), !target.isOAuth2 {
            return (target.credentials, target.server)
        }
        return try await callTarget()
    }

    /// What a proxied call needs, in one actor hop: a valid access token (with its DPoP key for
    /// OAuth accounts) and the PDS.
    func callTarget() async throws(DaemonError) -> (credentials: CallCredentials, pds: URL) {
        guard state.record.authKind != .oauth2 else {
            throw .invalidParams("account \(state.record.handle ?? state.record.did) is an OAuth 2.0 account at \(state.record.pds): call it with http.call (or /http/<account>/ on the gateway)",
                                 field: "account")
        }
        let secrets = try await validSecrets()
        guard let pds = pdsURL else { throw .internalError("account has an invalid PDS URL: \(state.record.pds)") }
        let credentials: CallCredentials = state.record.authKind == .oauth
            ? .dpop(token: secrets.accessToken, key: try dpopKey(from: secrets), did: state.record.did)
            : .bearer(secrets.accessToken)
        publishCallTarget(credentials, server: pds)
        return (credentials, pds)
    }

    /// The session's DPoP key, from `secrets`: decoded once per session's tokens, and taken from
    /// secrets the caller holds, so that no path reads the store for it.
    func dpopKey(from secrets: AccountSecrets) throws(DaemonError) -> DPoPKey {
        if let cached = activity?.cachedDPoPKey, cached.raw == secrets.dpopPrivateKey { return cached.key }
        guard let raw = secrets.dpopPrivateKey else {
            throw .internalError("the OAuth account \(id) has no DPoP key")
        }
        do {
            let key = try DPoPKey(rawRepresentation: raw)
            active.cachedDPoPKey = (raw, key)
            return key
        } catch {
            throw .internalError("the DPoP key of account \(id) does not load: \(error)")
        }
    }

    /// Secrets whose access token is not about to expire, refreshing first when needed.
    func validSecrets() async throws(DaemonError) -> AccountSecrets {
        try requireUsable()
        let secrets = try await currentSecrets()
        if let expiry = state.record.accessExpiresAt, expiry <= environment.now().addingTimeInterval(1) {
            return try await refresh()
        }
        return secrets
    }

    /// The server said `rejected` has expired: refresh once, unless another caller already did.
    func replaceExpired(token rejected: String) async throws(DaemonError) -> String {
        try requireUsable()
        let secrets = try await currentSecrets()
        if secrets.accessToken != rejected { return secrets.accessToken }
        return try await refresh().accessToken
    }

    func requireUsable() throws(DaemonError) {
        if state.record.state == .needsLogin {
            throw .needsLogin(account: id, reason: state.record.stateReason ?? "the server rejected the session")
        }
    }

    /// The tokens in use: those not saved yet, the cached ones, or the store's. A refresh that
    /// saved newer tokens while the store was read may have been read over: then they are read
    /// again, since the old ones (their refresh token spent) must never be cached or sent.
    func currentSecrets() async throws(DaemonError) -> AccountSecrets {
        while true {
            if let unsaved = state.unsavedSecrets { return unsaved }
            if let cachedSecrets { return cachedSecrets }
            let version = state.record.secretsVersion
            let secrets = try await storedSecrets()
            if state.unsavedSecrets != nil || cachedSecrets != nil { continue }
            guard state.record.secretsVersion == version else { continue }
            cache(secrets, version: version)
            return secrets
        }
    }

    var pdsURL: URL? {
        if let parsed = activity?.parsedPDS { return parsed }
        let parsed = URL(string: state.record.pds)
        if activity != nil { activity?.parsedPDS = parsed }
        return parsed
    }

    func requirePDSURL() throws(SessionError) -> URL {
        guard let pdsURL else { throw .protocolViolation("invalid PDS URL \(state.record.pds)") }
        return pdsURL
    }

    /// Ends the server session (best effort) and forgets the tokens. True when the server agreed.
    func endServerSession() async -> Bool {
        // The session's last input: no refresh starts from now on, and the one in flight ends
        // first, so what is revoked is the newest token. Revoking the token a refresh is
        // replacing would leave the rotated one live at the server.
        _ = apply(.removalBegan)
        if let inFlight = refreshInFlight { _ = try? await inFlight.value }
        guard let secrets = try? await currentSecrets() else { return false }
        switch state.record.authKind {
        case .oauth: return await revokeOAuthSession(secrets)
        case .oauth2: return await revokeOAuth2Session(secrets)
        case .appPassword: break
        }
        do {
            try await environment.sessions.deleteSession(pds: try requirePDSURL(), refreshJwt: secrets.refreshToken)
            return true
        } catch {
            logger.notice("could not end the server session", metadata: ["reason": "\(error.reason)"])
            return false
        }
    }
}

/// An account session's caches and tasks while it is in use: owned by its `AccountSession`
/// actor and touched only there. Idle accounts have none.
final class SessionActivity {
    var parsedPDS: URL?
    var cachedSecrets: (version: Int64, secrets: AccountSecrets)?
    var cachedDPoPKey: (raw: Data, key: DPoPKey)?
    var refreshInFlight: Task<AccountSecrets, any Error>?
    var identityCheckInFlight: Task<Void, Never>?
    /// This host's store writes out now (`drive`), and whether a record read meanwhile was put
    /// off until they are done (`adoptStored`).
    var storeWritesInFlight = 0
    var readAgainAfterWrites = false
    /// This account's call target is in `LiveCallTargets` (withdrawn at the next input).
    var publishedCallTarget = false

    /// True when nothing here is in use: the session may drop it. Without cached tokens the
    /// account is not making calls, and the parsed URL and key go with them.
    var isIdle: Bool {
        cachedSecrets == nil && refreshInFlight == nil && identityCheckInFlight == nil && storeWritesInFlight == 0
            && !readAgainAfterWrites && !publishedCallTarget
    }
}
