import BlueskyStore
import Foundation
import XRPC

extension AccountSession {
    /// Refreshes the session, or joins the refresh already in flight.
    ///
    /// While the account waits in its backoff no request leaves: the caller is told at once
    /// when the next try is (`UpstreamUnavailable` with `retryAfter`), unless `force` (a
    /// person's `accounts.refresh` with `force: true`) asks for a try now.
    @discardableResult
    func refresh(force: Bool = false) async throws(DaemonError) -> AccountSecrets {
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
                return try await self.performRefresh()
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
        if unsavedSecrets != nil {
            guard await saveUnsavedTokens() else { return nextRefreshDate() }
            if let next = nextRefreshDate(), next > environment.now() { return next }
        }
        _ = try? await refresh()
        return nextRefreshDate()
    }

    /// The refresh itself. Runs on the actor. Nothing is sent unless the write-ahead mark is
    /// on disk; the rotated tokens are committed durably before anyone uses them, or kept in
    /// memory (and saved again with backoff) when the store refuses them.
    private func performRefresh() async throws -> AccountSecrets {
        defer {
            refreshInFlight = nil
            releaseActivityIfIdle()
        }
        // Tokens rotated earlier but not yet saved: the refresh token they replace is spent,
        // so nothing else may happen before they are on disk.
        if unsavedSecrets != nil, await !saveUnsavedTokens() {
            throw DaemonError.upstreamUnavailable(retryReason ?? "the store cannot be written", retryAfter: backoffRemaining())
        }
        let old = try currentSecrets()
        let startedAt = environment.now()
        do {
            try environment.store.markRefreshStarted(id: id, at: startedAt)
        } catch {
            throw await storeRefused(error, while: "recording the refresh before sending it")
        }
        let session: RotatedSession
        do {
            session = try await rotate(old)
        } catch {
            throw await recordFailure(error, startedAt: startedAt)
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
        let metadataChanged = renamed || updated.oauth?.scope != record.oauth?.scope
        update(record: updated)
        interruptedRefresh = nil
        unsavedSecrets = secrets
        if await saveUnsavedTokens(), metadataChanged { saveMetadata() }
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
        guard let secrets = unsavedSecrets else { return true }
        do {
            try environment.store.saveRefreshedSession(
                id: id, secrets: secrets, accessExpiresAt: record.accessExpiresAt,
                refreshExpiresAt: record.refreshExpiresAt, at: record.lastRefreshAt ?? environment.now())
        } catch {
            _ = await storeRefused(error, while: "saving the rotated tokens (kept in memory until they are saved)")
            return false
        }
        unsavedSecrets = nil
        if record.state == .retrying {
            // The store was the only trouble; the session itself is fine.
            var recovered = record
            recovered.state = .active
            recovered.stateReason = nil
            update(record: recovered)
        }
        failedAttempts = 0
        retryAt = nil
        retryReason = nil
        return true
    }

    /// Writes the record's metadata (a new handle or scope); a failure is logged and left to
    /// the next write, which carries the whole record.
    func saveMetadata() {
        do {
            try environment.store.update(record)
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

    /// Records that the account's current handle passed the bidirectional check.
    func markHandleVerified(_ handle: String) throws {
        guard record.handle == handle, !record.handleVerified else { return }
        var updated = record
        updated.handleVerified = true
        try environment.store.update(updated)
        update(record: updated)
        logger.info("the account's handle is verified", metadata: ["handle": "\(handle)"])
    }
}
