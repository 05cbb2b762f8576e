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
        if stored.secretsVersion != record.secretsVersion {
            guard unsavedSecrets == nil else { return }
            cachedSecrets = nil
            cachedDPoPKey = nil
            heldElsewhereUntil = nil
            interruptedRefresh = nil
            if stored.state == .active {
                failedAttempts = 0
                retryAt = nil
                retryReason = nil
            }
        }
        if stored.state == .needsLogin {
            cachedSecrets = nil
            cachedDPoPKey = nil
            retryAt = nil
            retryReason = nil
        }
        update(record: stored)
        releaseActivityIfIdle()
        await environment.reschedule(id, nextRefreshDate())
    }

    /// The claim found newer tokens than this host's: another host refreshed. Reads them and
    /// the record, and hands them to the waiting callers.
    func adoptRefreshDoneElsewhere() async throws(DaemonError) -> AccountSecrets {
        let stored: AccountRecord?
        let secrets: AccountSecrets
        do {
            stored = try environment.store.account(id: id)
            secrets = try environment.store.secrets(for: id)
        } catch {
            throw .upstreamUnavailable(environment.store.health.problem ?? "cannot read the account: \(error)", retryAfter: nil)
        }
        guard let stored else { throw .accountNotFound(id.uuidString.lowercased()) }
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
            let stored: AccountRecord?
            do {
                stored = try environment.store.account(id: id)
            } catch {
                throw .upstreamUnavailable(environment.store.health.problem ?? "cannot read the account: \(error)", retryAfter: nil)
            }
            guard let stored else { throw .accountNotFound(id.uuidString.lowercased()) }
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
}
