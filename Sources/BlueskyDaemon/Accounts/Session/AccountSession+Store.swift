import AccountStoreCore
import Foundation

/// The store writes transitions ask for, and reading what other hosts stored.
extension AccountSession {
    /// Performs `write`; its result is the next input (nil: nothing more to apply).
    func perform(_ write: StoreWrite) async -> AccountLifecycle.Input? {
        let store = environment.store
        switch write {
        case .saveRotated(let secrets, let accessExpiresAt, let refreshExpiresAt, let scope, let handle, let at, let version):
            do {
                let saved = try await store.saveRefreshedSession(
                    id: id, secrets: secrets, accessExpiresAt: accessExpiresAt, refreshExpiresAt: refreshExpiresAt,
                    scope: scope, handle: handle, at: at, replacing: version)
                return .tokensSaved(version: saved)
            } catch .tokensSuperseded {
                return .tokensSuperseded(try? await store.account(id: id))
            } catch .recordAltered {
                return .recordAltered(at: environment.now())
            } catch {
                let problem = store.health.problem ?? "store unavailable: \(error)"
                return .storeRefused(reason: problem, at: environment.now())
            }
        case .markState(let accountState, let reason, let lease, let version, let at):
            do {
                try await store.markState(id: id, state: accountState, reason: reason, at: at, lease: lease, ifVersion: version)
                return nil
            } catch .tokensSuperseded {
                // The outcome says nothing of the newer tokens another host (or a login) stored.
                return (try? await store.account(id: id)).map { .stored($0) }
            } catch {
                logger.warning("cannot record the refresh's outcome", metadata: ["error": "\(error)"])
                return nil
            }
        }
    }

    /// The claim found newer tokens than this host's: another host refreshed (or a login
    /// replaced them). Reads them and the record, and hands them to the waiting callers.
    func adoptRefreshDoneElsewhere() async throws(DaemonError) -> AccountSecrets {
        let stored = try await storedRecord()
        let secrets = try await storedSecrets()
        adoptStored(stored)
        try requireUsable()
        if state.record.secretsVersion == stored.secretsVersion { cache(secrets, version: stored.secretsVersion) }
        logger.debug("tokens refreshed by another host", metadata: ["outcome": "adopted"])
        return secrets
    }

    /// Waits for the outcome of a refresh another host holds the lease of: its new tokens, or
    /// its verdict. Polls the store with a growing pause (50 ms to 1 s) until the lease ends;
    /// a NOTIFY usually brings the outcome sooner, and the next poll sees it.
    func awaitRefreshElsewhere(by holder: String, until: Date) async throws(DaemonError) -> AccountSecrets {
        logger.debug("another host is refreshing this account; waiting for its outcome", metadata: ["holder": "\(holder)"])
        var pause = 0.05
        let version = state.record.secretsVersion
        while environment.now() < until.addingTimeInterval(1) {
            try? await Task.sleep(for: .seconds(pause))
            pause = min(pause * 2, 1)
            let stored = try await storedRecord()
            if stored.secretsVersion != version { return try await adoptRefreshDoneElsewhere() }
            if stored.refreshStartedAt == nil {
                // The holder's refresh ended without new tokens: its verdict is the account's.
                adoptStored(stored)
                try requireUsable()
                throw .upstreamUnavailable(stored.stateReason ?? "another host's refresh failed", retryAfter: nil)
            }
        }
        throw .upstreamUnavailable("another host (\(holder)) is refreshing this account and has not finished", retryAfter: 1)
    }

    /// The account's row was rewritten outside blueskyd: it needs a new login, here and (as
    /// far as the store lets it be recorded) on every host.
    func markAltered() async {
        guard state.record.stateReason != StoreError.recordAlteredReason else { return }
        await drive(.recordAltered(at: environment.now()))
    }

    /// The account as the store holds it now.
    private func storedRecord() async throws(DaemonError) -> AccountRecord {
        let stored: AccountRecord?
        do {
            stored = try await environment.store.account(id: id)
        } catch {
            throw await refused(error, while: "reading the account")
        }
        guard let stored else { throw .accountNotFound(id.uuidString.lowercased()) }
        return stored
    }

    /// The secrets as stored. An account whose record was rewritten outside blueskyd, or whose
    /// sealed secrets do not open (the start-up check proved the key, so the blob was changed),
    /// needs a login instead; a store that cannot be read puts the account in its backoff, so
    /// that a lasting failure is not retried every second.
    func storedSecrets() async throws(DaemonError) -> AccountSecrets {
        do {
            return try await environment.store.secrets(for: id)
        } catch .recordAltered, .secretDoesNotOpen {
            await markAltered()
            throw .needsLogin(account: id, reason: StoreError.recordAlteredReason)
        } catch {
            throw await refused(error, while: "reading the account's secrets")
        }
    }
}
