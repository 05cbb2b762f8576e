import BlueskyStore
import Foundation

/// What a session does when the account is shared with other hosts (a PostgreSQL store): their
/// changes are taken over, and a refresh another host holds is waited out, never repeated.
extension AccountSession {
    /// Takes the account as another host left it in the store. Tokens of an older version
    /// than the stored one are dropped from memory (the next call reads the new ones); tokens
    /// this host rotated but has not saved yet stay, and their save finds the conflict.
    func adoptStored(_ stored: AccountRecord) async {
        guard stored != record else { return }
        let newTokens = stored.secretsVersion != record.secretsVersion
        if newTokens {
            guard unsavedSecrets == nil else { return }
            heldElsewhereUntil = nil
            interruptedRefresh = nil
        }
        if newTokens || stored.state == .needsLogin {
            cachedSecrets = nil
            cachedDPoPKey = nil
        }
        // New good tokens, or a verdict only a login changes: no backoff is left to wait out.
        if (newTokens && stored.state == .active) || stored.state == .needsLogin {
            failedAttempts = 0
            retryAt = nil
            retryReason = nil
        }
        update(record: stored)
        releaseActivityIfIdle()
        // With a shared schedule the host that made the change recorded the date.
        if !environment.scheduleIsShared { await environment.reschedule(id, nextRefreshDate()) }
    }

    /// Whether an account taken from the shared schedule needs refreshing now. The date it
    /// was taken by may be older than its tokens (another host refreshed since, or the
    /// account was just added), so the account is read as stored first. An unfinished
    /// refresh (a mark left by a host that died) is finished now: its token may be spent.
    func takenAccountIsDue() async -> Bool {
        if let stored = try? await environment.storeCall({ [id] in try $0.account(id: id) }) {
            await adoptStored(stored)
        }
        // Unreadable: the claim, which needs the store too, says what is wrong.
        guard record.state != .needsLogin else { return false }
        let now = environment.now()
        if record.refreshStartedAt != nil || unsavedSecrets != nil { return true }
        if backoffRemaining() != nil { return false }
        if let heldElsewhereUntil, heldElsewhereUntil > now { return false }
        guard let earliest = Self.plannedRefresh(of: record, environment: environment, jitter: Jitter.widest) else {
            return false
        }
        return earliest <= now
    }

    /// A refresh's outcome could not be stored over the tokens it was sent with: another host's
    /// refresh of them got through first (this host's lease had run out). Its tokens are the
    /// account's: adopted, or nil when they cannot be read.
    @discardableResult
    func adoptTokensStoredMeanwhile() async -> AccountSecrets? {
        logger.warning("another host saved newer tokens while this refresh ran (its lease had run out); using those",
                       metadata: ["outcome": "superseded"])
        return try? await adoptRefreshDoneElsewhere()
    }

    /// The claim found newer tokens than this host's: another host refreshed. Reads them and
    /// the record, and hands them to the waiting callers.
    func adoptRefreshDoneElsewhere() async throws(DaemonError) -> AccountSecrets {
        let stored = try await storedRecord()
        let secrets: AccountSecrets
        do {
            secrets = try await environment.storeCall { [id] in try $0.secrets(for: id) }
        } catch {
            throw storeUnreadable(error)
        }
        await adoptStored(stored)
        try requireUsable()
        logger.debug("tokens refreshed by another host", metadata: ["outcome": "adopted"])
        return secrets
    }

    /// Waits for the outcome of a refresh another host holds the lease of: its new tokens, or
    /// its verdict. Polls the store with a growing pause (50 ms to 1 s) until the lease ends;
    /// a NOTIFY usually brings the outcome sooner, and the next poll sees it.
    func awaitRefreshElsewhere(by holder: String, until: Date) async throws(DaemonError) -> AccountSecrets {
        logger.debug("another host is refreshing this account; waiting for its outcome", metadata: ["holder": "\(holder)"])
        var pause = 0.05
        let version = record.secretsVersion
        while environment.now() < until.addingTimeInterval(1) {
            try? await Task.sleep(for: .seconds(pause))
            pause = min(pause * 2, 1)
            let stored = try await storedRecord()
            if stored.secretsVersion != version { return try await adoptRefreshDoneElsewhere() }
            if stored.refreshStartedAt == nil {
                // The holder's refresh ended without new tokens: its verdict is the account's.
                await adoptStored(stored)
                try requireUsable()
                throw .upstreamUnavailable(stored.stateReason ?? "another host's refresh failed", retryAfter: nil)
            }
        }
        throw .upstreamUnavailable("another host (\(holder)) is refreshing this account and has not finished", retryAfter: 1)
    }

    /// The account as the store holds it now.
    private func storedRecord() async throws(DaemonError) -> AccountRecord {
        let stored: AccountRecord?
        do {
            stored = try await environment.storeCall { [id] in try $0.account(id: id) }
        } catch {
            throw storeUnreadable(error)
        }
        guard let stored else { throw .accountNotFound(id.uuidString.lowercased()) }
        return stored
    }

    private func storeUnreadable(_ error: any Error) -> DaemonError {
        .upstreamUnavailable(environment.store.health.problem ?? "cannot read the account: \(error)", retryAfter: nil)
    }
}
