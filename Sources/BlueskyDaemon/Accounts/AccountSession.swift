import BlueskyStore
import DPoP
import Foundation
import Logging
import XRPC

/// The one owner of an account's session: its record, its tokens, and its refreshes.
///
/// At most one refresh runs at a time; every caller that needs a fresh token meanwhile waits
/// for that one. Idle accounts keep no token in memory: secrets are read from the store when a
/// call or refresh needs them.
actor AccountSession {
    nonisolated let id: UUID
    private(set) var record: AccountRecord {
        didSet {
            if record.pds != oldValue.pds { parsedPDS = nil }
            recordDidChange(from: oldValue)
        }
    }
    let environment: SessionEnvironment
    /// A new login is replacing the session: its record change is a login, not a refresh.
    var replacingSession = false
    /// The 48-hour warning before a public OAuth session ends was logged (once per run).
    var warnedSessionEnd = false
    /// When the DID document was last looked at again (handle and PDS changes).
    var identityCheckedAt: Date? {
        get { identityCheckedSeconds.isNaN ? nil : Date(timeIntervalSinceReferenceDate: identityCheckedSeconds) }
        set { identityCheckedSeconds = newValue?.timeIntervalSinceReferenceDate ?? .nan }
    }
    /// `identityCheckedAt` as seconds (NaN: never): 8 bytes, not an optional's 16.
    private var identityCheckedSeconds: Double
    /// What only a busy or troubled account needs (cached tokens, a refresh in flight, a
    /// backoff); nil for the idle majority, which then carry one pointer instead of it all.
    private var activity: SessionActivity?

    /// - Parameter identityCheckedAt: when the DID document was last read (nil: never, so a
    ///   check is due).
    init(record: AccountRecord, environment: SessionEnvironment, identityCheckedAt: Date? = nil) {
        self.id = record.id
        self.record = record
        self.environment = environment
        self.identityCheckedSeconds = identityCheckedAt?.timeIntervalSinceReferenceDate ?? .nan
        if let started = record.refreshStartedAt {
            let activity = SessionActivity()
            activity.interruptedRefresh = (started, true)
            self.activity = activity
        }
    }

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

    /// `record.pds` parsed on first use, so that calls do not parse it again while idle
    /// accounts (most of them, at scale) do not carry a URL object at all.
    private var parsedPDS: URL? {
        get { activity?.parsedPDS }
        set { if newValue != nil || activity != nil { active.parsedPDS = newValue } }
    }
    /// Decrypted tokens, kept only while the account is being used for calls.
    var cachedSecrets: AccountSecrets? {
        get { activity?.cachedSecrets }
        set { if newValue != nil || activity != nil { active.cachedSecrets = newValue } }
    }
    /// The OAuth session's DPoP key, parsed once while the account is in use.
    var cachedDPoPKey: DPoPKey? {
        get { activity?.cachedDPoPKey }
        set { if newValue != nil || activity != nil { active.cachedDPoPKey = newValue } }
    }
    var refreshInFlight: Task<AccountSecrets, any Error>? {
        get { activity?.refreshInFlight }
        set { if newValue != nil || activity != nil { active.refreshInFlight = newValue } }
    }
    var identityCheckInFlight: Task<Void, Never>? {
        get { activity?.identityCheckInFlight }
        set { if newValue != nil || activity != nil { active.identityCheckInFlight = newValue } }
    }
    /// Consecutive transient failures, for the backoff.
    var failedAttempts: Int {
        get { activity?.failedAttempts ?? 0 }
        set { if newValue != 0 || activity != nil { active.failedAttempts = newValue } }
    }
    /// The account's one backoff: until then no refresh request leaves, whoever asks.
    var retryAt: Date? {
        get { activity?.retryAt }
        set { if newValue != nil || activity != nil { active.retryAt = newValue } }
    }
    /// Why the account waits (the last failure), for callers turned away meanwhile.
    var retryReason: String? {
        get { activity?.retryReason }
        set { if newValue != nil || activity != nil { active.retryReason = newValue } }
    }
    /// Tokens the server rotated that the store could not save yet: used for calls, saved again
    /// with backoff, and never replaced by another refresh before they are on disk.
    var unsavedSecrets: AccountSecrets? {
        get { activity?.unsavedSecrets }
        set { if newValue != nil || activity != nil { active.unsavedSecrets = newValue } }
    }
    /// A refresh whose outcome is unknown (blueskyd stopped, or the answer was lost): when it
    /// was sent, and whether by an earlier run. Explains a later "refresh token replayed".
    var interruptedRefresh: (at: Date, earlierRun: Bool)? {
        get { activity?.interruptedRefresh }
        set { if newValue != nil || activity != nil { active.interruptedRefresh = newValue } }
    }

    var heldElsewhereUntil: Date? {
        get { activity?.heldElsewhereUntil }
        set { if newValue != nil || activity != nil { active.heldElsewhereUntil = newValue } }
    }

    var logger: Logger {
        var logger = environment.logger
        logger[metadataKey: "account"] = "\(id.uuidString.lowercased())"
        logger[metadataKey: "did"] = "\(record.did)"
        return logger
    }

    /// Replaces the record after a change made elsewhere (default account, handle).
    func update(record: AccountRecord) {
        self.record = record
    }

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

    /// What a proxied call needs, in one actor hop: a valid access token (with its DPoP key for
    /// OAuth accounts) and the PDS.
    func callTarget() async throws(DaemonError) -> (credentials: CallCredentials, pds: URL) {
        let secrets = try await validSecrets()
        guard let pds = pdsURL else { throw .internalError("account has an invalid PDS URL: \(record.pds)") }
        guard record.authKind == .oauth else { return (.bearer(secrets.accessToken), pds) }
        return (.dpop(token: secrets.accessToken, key: try dpopKey(from: secrets), did: record.did), pds)
    }

    /// The session's DPoP key, from `secrets` (the key never changes within a session; it is
    /// decoded once). Taken from secrets the caller holds, so that no path reads the store for it.
    func dpopKey(from secrets: AccountSecrets) throws(DaemonError) -> DPoPKey {
        if let cachedDPoPKey { return cachedDPoPKey }
        guard let raw = secrets.dpopPrivateKey else {
            throw .internalError("the OAuth account \(id) has no DPoP key")
        }
        do {
            let key = try DPoPKey(rawRepresentation: raw)
            cachedDPoPKey = key
            return key
        } catch {
            throw .internalError("the DPoP key of account \(id) does not load: \(error)")
        }
    }

    /// A new login replaced the session in the store (same id): use its record and tokens now.
    func adoptNewSession(_ newRecord: AccountRecord) {
        replacingSession = true
        record = newRecord
        replacingSession = false
        cachedSecrets = nil
        cachedDPoPKey = nil
        warnedSessionEnd = false
        failedAttempts = 0
        retryAt = nil
        retryReason = nil
        unsavedSecrets = nil
        interruptedRefresh = nil
    }

    /// Secrets whose access token is not about to expire, refreshing first when needed.
    func validSecrets() async throws(DaemonError) -> AccountSecrets {
        try requireUsable()
        let secrets = try await currentSecrets()
        if let expiry = record.accessExpiresAt, expiry <= environment.now().addingTimeInterval(1) {
            return try await refresh()
        }
        cachedSecrets = secrets
        return secrets
    }

    /// The server said `rejected` has expired: refresh once, unless another caller already did.
    func replaceExpired(token rejected: String) async throws(DaemonError) -> String {
        try requireUsable()
        let secrets = try await currentSecrets()
        if secrets.accessToken != rejected { return secrets.accessToken }
        return try await refresh().accessToken
    }

    /// When the scheduler should next refresh this account; nil when it waits for a new login.
    func nextRefreshDate() -> Date? {
        guard record.state != .needsLogin else { return nil }
        if let retryAt { return retryAt }
        if let heldElsewhereUntil, heldElsewhereUntil > environment.now() { return heldElsewhereUntil }
        return Self.plannedRefresh(of: record, environment: environment)
    }

    /// When a refresh of `record` is due, backoff aside; nil when it waits for a new login.
    ///
    /// The lead time gets up to 20 % of jitter (at most a third of the token's life), so that
    /// accounts added or refreshed together drift apart instead of falling due in one burst.
    static func plannedRefresh(of record: AccountRecord, environment: SessionEnvironment,
                               jitter: Double = Jitter.uniform(in: 1.0...Jitter.widest)) -> Date? {
        guard record.state != .needsLogin else { return nil }
        guard let expiry = record.accessExpiresAt else {
            // Opaque token: refresh on a fixed period so the refresh token stays fresh.
            return (record.lastRefreshAt ?? environment.now()).addingTimeInterval(15 * 60)
        }
        let issued = record.lastRefreshAt ?? record.createdAt
        let lifetime = max(0, expiry.timeIntervalSince(issued))
        let ahead = min(environment.refreshAhead.seconds, lifetime / 4)
        let jittered = min(ahead * jitter, lifetime / 3)
        return expiry.addingTimeInterval(-jittered)
    }

    func requireUsable() throws(DaemonError) {
        if record.state == .needsLogin {
            throw .needsLogin(account: id, reason: record.stateReason ?? "the server rejected the session")
        }
    }

    /// The tokens in use: those not saved yet, the cached ones, or the store's (read on the
    /// concurrency pool, see `SessionEnvironment.storeCall`). A refresh that saved new tokens
    /// while the store was read may have been read over: then they are read again, since the
    /// old ones (their refresh token spent) must never be cached or sent.
    func currentSecrets() async throws(DaemonError) -> AccountSecrets {
        if let unsavedSecrets { return unsavedSecrets }
        if let cachedSecrets { return cachedSecrets }
        let (id, version) = (id, record.secretsVersion)
        let secrets: AccountSecrets
        do {
            secrets = try await environment.storeCall { try $0.secrets(for: id) }
        } catch {
            throw .internalError("cannot read the secrets of account \(id): \(error)")
        }
        if let newer = unsavedSecrets ?? cachedSecrets { return newer }
        guard record.secretsVersion == version else { return try await currentSecrets() }
        return secrets
    }

    /// Ends the server session (best effort) and forgets the tokens. True when the server agreed.
    func endServerSession() async -> Bool {
        guard let secrets = try? await currentSecrets() else { return false }
        if record.authKind == .oauth { return await revokeOAuthSession(secrets) }
        do {
            try await environment.sessions.deleteSession(pds: try requirePDSURL(), refreshJwt: secrets.refreshToken)
            return true
        } catch {
            logger.notice("could not end the server session", metadata: ["reason": "\(error.reason)"])
            return false
        }
    }

    var pdsURL: URL? {
        if let parsedPDS { return parsedPDS }
        parsedPDS = URL(string: record.pds)
        return parsedPDS
    }

    func requirePDSURL() throws(SessionError) -> URL {
        guard let pdsURL else { throw .protocolViolation("invalid PDS URL \(record.pds)") }
        return pdsURL
    }
}
