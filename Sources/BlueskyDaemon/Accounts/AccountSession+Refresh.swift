import BlueskyStore
import Foundation
import XRPC

extension AccountSession {
    /// Refreshes the session, or joins the refresh already in flight.
    ///
    /// While the account waits in its backoff no request leaves: the caller is told at once
    /// when the next try is (`UpstreamUnavailable` with `retryAfter`), unless `force` (a
    /// person's `accounts.refresh` with `force: true`) asks for a try now.
    /// - Parameter waitForHolder: when another host holds the refresh lease, wait for its
    ///   outcome (a call that needs a token does); otherwise return at once and let the schedule
    ///   look again when the lease ends.
    @discardableResult
    func refresh(force: Bool = false, waitForHolder: Bool = true) async throws(DaemonError) -> AccountSecrets {
        try requireUsable()
        let task: Task<AccountSecrets, any Error>
        if let running = refreshInFlight {
            task = running
        } else {
            if !force, let wait = backoffRemaining() {
                throw .upstreamUnavailable(retryReason ?? "an earlier refresh failed", retryAfter: wait)
            }
            environment.refreshes.begin()
            // Off the caller's event loop: a refresh writes the store (with fsync) twice.
            task = Task(executorPreference: globalConcurrentExecutor) {
                defer { self.environment.refreshes.end() }
                return try await self.performRefresh(waitForHolder: waitForHolder)
            }
            refreshInFlight = task
        }
        do {
            return try await task.value
        } catch let error as DaemonError {
            throw error
        } catch {
            throw .internalError("refresh failed: \(error)")
        }
    }

    /// Seconds until the backoff ends; nil when the account may try now.
    func backoffRemaining() -> TimeInterval? {
        guard let retryAt else { return nil }
        let remaining = retryAt.timeIntervalSince(environment.now())
        // A timer that fires a hair early is not turned away.
        return remaining > 0.05 ? remaining : nil
    }

    /// The scheduler's turn: save tokens the store refused earlier, then refresh when due.
    /// Returns when to come back.
    func scheduledUpkeep() async -> Date? {
        if environment.scheduleIsShared, await !takenAccountIsDue() { return nextRefreshDate() }
        if unsavedSecrets != nil {
            guard await saveUnsavedTokens() else { return nextRefreshDate() }
            if let next = nextRefreshDate(), next > environment.now() { return next }
        }
        _ = try? await refresh(waitForHolder: false)
        return nextRefreshDate()
    }

    /// The refresh itself. Runs on the actor. Nothing is sent unless the write-ahead mark is
    /// on disk; the rotated tokens are committed durably before anyone uses them, or kept in
    /// memory (and saved again with backoff) when the store refuses them.
    private func performRefresh(waitForHolder: Bool) async throws -> AccountSecrets {
        defer {
            refreshInFlight = nil
            releaseActivityIfIdle()
        }
        // Tokens rotated earlier but not yet saved: the refresh token they replace is spent,
        // so nothing else may happen before they are on disk.
        if unsavedSecrets != nil, await !saveUnsavedTokens() {
            throw DaemonError.upstreamUnavailable(retryReason ?? "the store cannot be written", retryAfter: backoffRemaining())
        }
        let old = try await currentSecrets()
        let startedAt = environment.now()
        let claimedVersion = record.secretsVersion
        let claim: RefreshClaim
        do {
            claim = try await environment.storeCall { [id, version = claimedVersion] in
                try $0.claimRefresh(id: id, expecting: version, at: startedAt)
            }
        } catch {
            throw await storeRefused(error, while: "recording the refresh before sending it")
        }
        switch claim {
        case .granted(let interruptedAt):
            heldElsewhereUntil = nil
            if let interruptedAt, interruptedRefresh == nil { interruptedRefresh = (interruptedAt, true) }
        case .superseded:
            return try await adoptRefreshDoneElsewhere()
        case .held(let holder, let until):
            guard waitForHolder else {
                // Only the schedule asks without waiting, and it comes back at nextRefreshDate().
                heldElsewhereUntil = until
                throw DaemonError.upstreamUnavailable("another host (\(holder)) is refreshing this account",
                                                      retryAfter: until.timeIntervalSince(startedAt))
            }
            return try await awaitRefreshElsewhere(by: holder, until: until)
        }
        let rotation: Result<RotatedSession, SessionError>
        do {
            rotation = .success(try await rotate(old))
        } catch {
            rotation = .failure(error)
        }
        guard record.secretsVersion == claimedVersion else {
            // Newer tokens arrived while the request was out: a new login replaced the session
            // (an upgrade to OAuth, a mended account), or another host's refresh was adopted.
            // They and their state are the account's; whatever this refresh brought back,
            // tokens or a verdict, is dropped.
            logger.info("the account's tokens changed during its refresh; keeping the newer ones",
                        metadata: ["outcome": "superseded-by-login"])
            return try await currentSecrets()
        }
        let session: RotatedSession
        switch rotation {
        case .success(let rotated): session = rotated
        case .failure(let error): throw await recordFailure(error, startedAt: startedAt)
        }
        guard session.did == record.did else {
            throw await recordFailure(.rejected("the server returned a session for \(session.did), not \(record.did)"), startedAt: startedAt)
        }
        var secrets = old
        secrets.accessToken = session.accessToken
        secrets.refreshToken = session.refreshToken
        let now = environment.now()
        var updated = record
        updated.accessExpiresAt = session.accessExpiresAt
        updated.refreshExpiresAt = session.refreshExpiresAt
        updated.lastRefreshAt = now
        updated.refreshStartedAt = nil
        updated.state = .active
        updated.stateReason = nil
        // Only a changed grant makes a new copy of the OAuth facts (a narrowed scope is rare).
        if let scope = session.scope, scope != record.oauth?.scope { updated.oauth?.scope = scope }
        let renamed = session.handle.map { $0 != record.handle } ?? false
        if renamed {
            // The PDS's word alone does not make a handle ours: it stays unverified (and is not
            // looked up by) until AccountManager's identity recheck verifies it both ways.
            updated.handle = session.handle
            updated.handleVerified = false
        }
        let identityChanged = renamed || updated.oauth?.scope != record.oauth?.scope
        update(record: updated)
        interruptedRefresh = nil
        unsavedSecrets = secrets
        let outcome = await saveRotatedTokens()
        if outcome == .superseded {
            // Another host's tokens won (this host's lease had run out): use theirs.
            return try await currentSecrets()
        }
        if outcome == .saved { environment.refreshes.countRotation() }
        if outcome == .saved, identityChanged { await saveIdentity() }
        if renamed {
            logger.notice("the server reports a new handle", metadata: ["handle": "\(updated.handle ?? "-")"])
        }
        // Keep tokens in memory only for accounts that are in use.
        if cachedSecrets != nil { cachedSecrets = secrets }
        logger.info("session refreshed", metadata: ["outcome": "refreshed"])
        await environment.reschedule(id, nextRefreshDate())
        return secrets
    }

    /// Saves `unsavedSecrets` with the record's expiries. True once they are on disk; false
    /// (the account then waits in its backoff, the tokens still in memory) when the store
    /// refuses them.
    @discardableResult
    func saveUnsavedTokens() async -> Bool {
        await saveRotatedTokens() != .refused
    }

    enum SaveOutcome { case saved, refused, superseded }

    /// Saves `unsavedSecrets` over the version they were refreshed from. `.superseded`: another
    /// host stored newer tokens meanwhile, and the account now uses those.
    func saveRotatedTokens() async -> SaveOutcome {
        guard let secrets = unsavedSecrets else { return .saved }
        let version: Int64
        do {
            let (id, saved, at) = (id, record, record.lastRefreshAt ?? environment.now())
            version = try await environment.storeCall {
                try $0.saveRefreshedSession(id: id, secrets: secrets, accessExpiresAt: saved.accessExpiresAt,
                                            refreshExpiresAt: saved.refreshExpiresAt, at: at, replacing: saved.secretsVersion)
            }
        } catch StoreError.tokensSuperseded {
            unsavedSecrets = nil
            await adoptTokensStoredMeanwhile()
            return .superseded
        } catch {
            _ = await storeRefused(error, while: "saving the rotated tokens (kept in memory until they are saved)")
            return .refused
        }
        unsavedSecrets = nil
        var saved = record
        saved.secretsVersion = version
        if saved.state == .retrying {
            // The store was the only trouble; the session itself is fine.
            saved.state = .active
            saved.stateReason = nil
        }
        update(record: saved)
        failedAttempts = 0
        retryAt = nil
        retryReason = nil
        return .saved
    }

    /// Writes the record's identity (a new handle or scope); a failure is logged, and the
    /// identity recheck writes it again.
    func saveIdentity() async {
        do {
            try await environment.storeCall { [record] in try $0.saveIdentity(record) }
        } catch {
            logger.warning("cannot save the account's details", metadata: ["error": "\(error)"])
        }
    }

    /// The new tokens of a refresh, whichever way the account signs in.
    struct RotatedSession: Sendable {
        var did: String
        var accessToken: String
        var refreshToken: String
        var accessExpiresAt: Date?
        var refreshExpiresAt: Date?
        var handle: String?
        /// The scope granted (OAuth).
        var scope: String?
    }

    /// One refresh request: `refreshSession` for app passwords, the token endpoint with DPoP for OAuth.
    private func rotate(_ old: AccountSecrets) async throws(SessionError) -> RotatedSession {
        if record.authKind == .oauth { return try await rotateOAuth(old) }
        let session = try await environment.sessions.refreshSession(pds: try requirePDSURL(), refreshJwt: old.refreshToken)
        return RotatedSession(did: session.did, accessToken: session.accessJwt, refreshToken: session.refreshJwt,
                              accessExpiresAt: session.accessExpiresAt, refreshExpiresAt: session.refreshExpiresAt,
                              handle: session.handle)
    }
}
