import BlueskyStore
import Foundation
import XRPC

extension AccountSession {
    /// Refreshes the session, or joins the refresh already in flight.
    @discardableResult
    func refresh() async throws(DaemonError) -> AccountSecrets {
        try requireUsable()
        let task: Task<AccountSecrets, any Error>
        if let running = refreshInFlight {
            task = running
        } else {
            task = Task { try await self.performRefresh() }
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

    /// The refresh itself. Runs on the actor; the rotated tokens are committed durably before
    /// anyone can use them, and `refreshInFlight` is cleared only once the outcome is recorded.
    private func performRefresh() async throws -> AccountSecrets {
        defer { refreshInFlight = nil }
        let old = try currentSecrets()
        let store = environment.store
        let startedAt = environment.now()
        try store.markRefreshStarted(id: id, at: startedAt)
        let session: RotatedSession
        do {
            session = try await rotate(old)
        } catch {
            throw try await recordFailure(error)
        }
        guard session.did == record.did else {
            throw try await recordFailure(.rejected("the server returned a session for \(session.did), not \(record.did)"))
        }
        var secrets = old
        secrets.accessToken = session.accessToken
        secrets.refreshToken = session.refreshToken
        let now = environment.now()
        try store.saveRefreshedSession(id: id, secrets: secrets, accessExpiresAt: session.accessExpiresAt,
                                       refreshExpiresAt: session.refreshExpiresAt, at: now)
        var updated = record
        updated.accessExpiresAt = session.accessExpiresAt
        updated.refreshExpiresAt = session.refreshExpiresAt
        updated.lastRefreshAt = now
        updated.refreshStartedAt = nil
        updated.state = .active
        updated.stateReason = nil
        if let scope = session.scope, scope != record.oauth?.scope {
            // A narrowed grant is worth knowing (and showing); it rarely changes.
            updated.oauth?.scope = scope
            try store.update(updated)
        }
        let renamed = session.handle.map { $0 != record.handle } ?? false
        if renamed {
            // The PDS's word alone does not make a handle ours: it stays unverified (and is not
            // looked up by) until AccountManager's identity recheck verifies it both ways.
            updated.handle = session.handle
            updated.handleVerified = false
        }
        update(record: updated)
        if renamed { try adoptNewHandle(of: updated) }
        failedAttempts = 0
        retryAt = nil
        // Keep tokens in memory only for accounts that are in use.
        if cachedSecrets != nil { cachedSecrets = secrets }
        logger.info("session refreshed", metadata: ["outcome": "refreshed"])
        await environment.reschedule(id, nextRefreshDate())
        return secrets
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

    /// The server reports a new handle: save it, unverified; the old one no longer names the account.
    private func adoptNewHandle(of updated: AccountRecord) throws {
        try environment.store.update(updated)
        environment.registry.reindexHandle(of: id, to: nil)
        logger.notice("the server reports a new handle", metadata: ["handle": "\(updated.handle ?? "-")"])
    }

    /// Records that the account's current handle passed the bidirectional check.
    func markHandleVerified(_ handle: String) throws {
        guard record.handle == handle, !record.handleVerified else { return }
        var updated = record
        updated.handleVerified = true
        try environment.store.update(updated)
        update(record: updated)
        environment.registry.reindexHandle(of: id, to: handle)
        logger.info("the account's handle is verified", metadata: ["handle": "\(handle)"])
    }

    /// Records why a refresh failed and returns the error for the waiting callers.
    private func recordFailure(_ error: SessionError) async throws -> DaemonError {
        let outcome = try noteFailure(error)
        await environment.reschedule(id, nextRefreshDate())
        return outcome
    }

    private func noteFailure(_ error: SessionError) throws -> DaemonError {
        var updated = record
        // The write-ahead mark stays only when the outcome is unknown (no answer): the next
        // refresh then replays the old token within the server's grace period, on purpose.
        if case .noAnswer = error {} else { updated.refreshStartedAt = nil }
        switch error {
        case .transient, .noAnswer, .protocolViolation:
            // A garbled answer may be a proxy's error page: keep the account and retry.
            let reason = error.reason
            let retryAfter: TimeInterval? = if case .transient(_, let after) = error { after } else { nil }
            failedAttempts += 1
            let delay = environment.backoff.delay(attempt: failedAttempts, serverAsked: retryAfter)
            retryAt = environment.now().addingTimeInterval(delay)
            updated.state = .retrying
            updated.stateReason = reason
            try environment.store.update(updated)
            update(record: updated)
            logger.warning("refresh failed, will retry", metadata: [
                "outcome": "retrying", "reason": "\(reason)", "retryInSeconds": "\(Int(delay))",
            ])
            return .upstreamUnavailable(reason)
        case .expiredToken(let reason), .rejected(let reason), .authenticationFailed(let reason),
             .authFactorTokenRequired(let reason):
            updated.state = .needsLogin
            updated.stateReason = reason
            try environment.store.update(updated)
            update(record: updated)
            cachedSecrets = nil
            retryAt = nil
            logger.error("session rejected; the account needs a new login", metadata: [
                "outcome": "needs-login", "reason": "\(reason)",
            ])
            return .needsLogin(account: id, reason: reason)
        }
    }
}
