import AccountStoreCore
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
        // Its logout revokes the newest token; a refresh now would make a newer one.
        if state.isRemoving, refreshInFlight == nil { throw .accountNotFound(id.uuidString.lowercased()) }
        // No refresh token to spend: the session lasts as long as its access token.
        if state.record.oauth?.clientKind == .oauth2AccessOnly { return try await endAccessOnlySessionIfDue() }
        let task: Task<AccountSecrets, any Error>
        if let running = refreshInFlight {
            task = running
        } else {
            if !force, let wait = backoffRemaining() {
                throw .upstreamUnavailable(state.trouble.retryReason ?? "an earlier refresh failed", retryAfter: wait)
            }
            let refreshes = environment.refreshes
            refreshes.begin()
            // Never cancelled: a refresh cut off between the server's rotation and the save
            // loses the account. A stop waits for it instead (`RefreshTracker`).
            task = Task {
                defer { refreshes.end() }
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
        guard let retryAt = state.retryAt else { return nil }
        let remaining = retryAt.timeIntervalSince(environment.now())
        // A timer that fires a hair early is not turned away.
        return remaining > 0.05 ? remaining : nil
    }

    /// The refresh itself. Nothing is sent unless the write-ahead mark is durable and enough of
    /// the lease is left for the request; the rotated tokens are committed durably before
    /// anyone uses them, or kept in memory (and saved again with backoff) when the store
    /// refuses them.
    private func performRefresh(waitForHolder: Bool) async throws(DaemonError) -> AccountSecrets {
        defer {
            refreshInFlight = nil
            releaseActivityIfIdle()
        }
        // Tokens rotated earlier but not saved yet: the refresh token they replace is spent,
        // so nothing else may happen before they are on disk.
        if state.unsavedSecrets != nil {
            try await saveUnsavedTokens()
            if let unsaved = state.unsavedSecrets { return unsaved }
        }
        let old = try await currentSecrets()
        let startedAt = environment.now()
        let claimedVersion = state.record.secretsVersion
        let leaseClock = ContinuousClock.now
        let claim: RefreshClaim
        do {
            claim = try await environment.store.claimRefresh(id: id, expecting: claimedVersion, at: startedAt)
        } catch {
            throw await refused(error, while: "recording the refresh before sending it")
        }
        switch claim {
        case .granted(let interruptedAt):
            apply(.claimGranted(interruptedAt: interruptedAt, at: startedAt))
            if environment.store.sharedLease != nil { environment.metrics?.leaseTaken(takenOver: interruptedAt != nil) }
        case .superseded:
            return try await adoptRefreshDoneElsewhere()
        case .held(let holder, let until):
            guard waitForHolder else {
                // Only the schedule asks without waiting, and it comes back when the lease ends.
                apply(.heldElsewhere(until: until))
                throw .upstreamUnavailable("another host (\(holder)) is refreshing this account",
                                           retryAfter: until.timeIntervalSince(startedAt))
            }
            return try await awaitRefreshElsewhere(by: holder, until: until)
        }
        // The lease must outlive the exchange: a request that could still be out when it ends
        // would let another host send the same refresh token. Each request (a nonce
        // challenge's second one too) leaves only if its whole deadline fits in what is left.
        let sendBy = environment.store.sharedLease.map { leaseClock + $0 - environment.leaseMargin }
        if let sendBy, ContinuousClock.now + environment.upstreamTimeout > sendBy {
            let reason = "too little of the refresh lease was left after recording it (the store answered slowly)"
            throw await failure(.transient(reason, retryAfter: nil), startedAt: startedAt)
        }
        let rotation: Result<RotatedSession, SessionError>
        let exchangeStart = ContinuousClock.now
        do {
            rotation = .success(try await rotate(old, sendBy: sendBy))
        } catch {
            rotation = .failure(error)
        }
        environment.metrics?.refreshExchange(kind: state.record.authKind, took: ContinuousClock.now - exchangeStart)
        guard state.record.secretsVersion == claimedVersion else {
            // Newer tokens arrived while the request was out: a new login replaced the session
            // (an upgrade to OAuth, a mended account), or another host's refresh was adopted.
            // They and their state are the account's; whatever this refresh brought back,
            // tokens or a verdict, is dropped.
            apply(.refreshAbandoned)
            logger.info("the account's tokens changed during its refresh; keeping the newer ones",
                        metadata: ["outcome": "superseded-by-login"])
            return try await currentSecrets()
        }
        let session: RotatedSession
        switch rotation {
        case .success(let rotated) where rotated.did == state.record.did:
            session = rotated
        case .success(let rotated):
            let error = SessionError.rejected("the server returned a session for \(rotated.did), not \(state.record.did)")
            throw await failure(error, startedAt: startedAt)
        case .failure(let error):
            throw await failure(error, startedAt: startedAt)
        }
        var secrets = old
        secrets.accessToken = session.accessToken
        secrets.refreshToken = session.refreshToken
        let outcome = await drive(.rotated(session, secrets: secrets, at: environment.now()))
        if case .tokensSaved(let version) = outcome {
            environment.refreshes.countRotation()
            // Unless a login replaced the session while the save was out.
            if state.record.secretsVersion == version {
                cache(secrets, version: version)
                return secrets
            }
        }
        // The store refused them: they are used from memory until it takes them.
        if let unsaved = state.unsavedSecrets { return unsaved }
        // Newer tokens won (another host's, this host's lease having run out, or a login's).
        return try await currentSecrets()
    }

    /// Records a failed refresh and returns the error for the waiting callers.
    private func failure(_ error: SessionError, startedAt: Date) async -> DaemonError {
        await drive(.refreshFailed(error, startedAt: startedAt, at: environment.now()))
        if state.record.state == .needsLogin {
            return .needsLogin(account: id, reason: state.record.stateReason ?? error.reason)
        }
        return .upstreamUnavailable(error.reason, retryAfter: backoffRemaining())
    }

    /// The store refused a write the refresh needs: the account waits in its backoff, nothing
    /// is sent meanwhile, and the caller learns when the next try is.
    func refused(_ error: StoreError, while doing: String) async -> DaemonError {
        if case .recordAltered = error {
            await markAltered()
            return .needsLogin(account: id, reason: StoreError.recordAlteredReason)
        }
        let problem = environment.store.health.problem ?? "store unavailable: \(error)"
        logger.debug("store write failed", metadata: ["while": "\(doing)", "error": "\(error)"])
        await drive(.storeRefused(reason: problem, at: environment.now()))
        return .upstreamUnavailable(problem, retryAfter: backoffRemaining())
    }

    /// Saves the rotated tokens the store refused earlier; they stay in memory (and the account
    /// in its backoff) when it refuses again.
    func saveUnsavedTokens() async throws(DaemonError) {
        guard state.unsavedSecrets != nil else { return }
        await drive(.retrySave(at: environment.now()))
        if state.unsavedSecrets != nil {
            throw .upstreamUnavailable(state.trouble.retryReason ?? "the store cannot be written", retryAfter: backoffRemaining())
        }
    }

    /// One refresh request: `refreshSession` for app passwords, the token endpoint with DPoP for
    /// atproto OAuth, the server's token endpoint for another OAuth 2.0 server.
    private func rotate(_ old: AccountSecrets, sendBy: ContinuousClock.Instant?) async throws(SessionError) -> RotatedSession {
        switch state.record.authKind {
        case .oauth: return try await rotateOAuth(old, sendBy: sendBy)
        case .oauth2: return try await rotateOAuth2(old, sendBy: sendBy)
        case .appPassword: break
        }
        let session = try await environment.sessions.refreshSession(pds: try requirePDSURL(), refreshJwt: old.refreshToken)
        return RotatedSession(did: session.did, accessToken: session.accessJwt, refreshToken: session.refreshJwt,
                              accessExpiresAt: session.accessExpiresAt, refreshExpiresAt: session.refreshExpiresAt,
                              handle: session.handle)
    }
}
