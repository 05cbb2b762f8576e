import ATIdentity
import ATSyntax
import BlueskyStore
import Foundation
import Logging
import XRPC

/// Adds, removes and looks after accounts: the registry, the store and the schedule together.
final class AccountManager: Sendable {
    var registry: AccountRegistry { environment.registry }
    let store: AccountStore
    let scheduler: RefreshScheduler
    let environment: SessionEnvironment
    let identity: IdentityResolver
    let logger: Logger
    /// The periodic identity rechecks, run beside the refreshes rather than in their slots.
    let backgroundChecks = BackgroundChecks(limit: 4)

    init(store: AccountStore, scheduler: RefreshScheduler, environment: SessionEnvironment, identity: IdentityResolver) {
        self.store = store
        self.scheduler = scheduler
        self.environment = environment
        self.identity = identity
        self.logger = environment.logger
    }

    /// Loads every account from the store and builds the schedule.
    func loadAll() async throws {
        let records = try store.allAccounts()
        for record in records {
            let session = AccountSession(record: record, environment: environment,
                                         identityCheckedAt: Self.seededIdentityCheck(now: environment.now()))
            registry.insert(session, record: record)
            if let started = record.refreshStartedAt {
                // The daemon stopped while a refresh was in flight: its outcome is unknown. The
                // server's grace period lets the old refresh token recover; refresh right away.
                logger.warning("a refresh was in flight when blueskyd stopped; refreshing again", metadata: [
                    "account": "\(record.id.uuidString.lowercased())", "did": "\(record.did)",
                    "startedAt": "\(started)",
                ])
                await scheduler.schedule(record.id, at: environment.now())
            } else {
                await scheduler.schedule(record.id, at: await session.nextRefreshDate())
            }
            if record.state != .needsLogin, record.sessionEndsSoon(now: environment.now()) {
                await session.warnIfSessionEndsSoon()
            }
        }
        if records.contains(where: { $0.authKind == .oauth }) {
            let stored = try store.allDPoPNonces()
            environment.oauth.importNonces(stored, didOf: Dictionary(uniqueKeysWithValues: records.map { ($0.id, $0.did) }))
        }
        logger.info("accounts loaded", metadata: ["count": "\(records.count)"])
    }

    /// The scheduler's action: refresh one account, and say when it is due next.
    func scheduledRefresh(_ id: UUID) async -> Date? {
        guard let session = try? registry.session(id.uuidString) else { return nil }
        do {
            try await session.refresh()
            await recheckIdentityIfDue(of: session)
        } catch {
            // Already recorded and logged by the session; the next date reflects the outcome.
        }
        return await session.nextRefreshDate()
    }

    /// Logs in with an app password and registers the account.
    func addAppPasswordAccount(identifier: String, password: String, authFactorToken: String?,
                               makeDefault: Bool) async throws(DaemonError) -> AccountRecord {
        guard let parsed = try? ATIdentifier(parsing: identifier) else {
            throw .invalidParams("'\(identifier)' is neither a handle nor a DID", field: "identifier")
        }
        let resolved: ResolvedIdentity
        do {
            resolved = try await identity.resolve(parsed)
        } catch {
            throw .identityResolutionFailed(error.description)
        }
        let did = resolved.did.description
        let session: LegacySession
        do {
            session = try await environment.sessions.createSession(
                pds: resolved.pds, identifier: did, password: password, authFactorToken: authFactorToken)
        } catch {
            throw Self.loginError(error)
        }
        guard session.did == did else {
            throw .authenticationFailed("the server logged in \(session.did), not \(did)")
        }
        let now = environment.now()
        // The first account, or the first since the default one was removed, becomes the default.
        let isFirst = registry.defaultID == nil
        let record = AccountRecord(
            id: UUID(), did: did, handle: resolved.handle?.description ?? session.handle,
            handleVerified: resolved.handleVerified, pds: resolved.pds.absoluteString, authKind: .appPassword,
            state: .active, stateReason: nil, isDefault: false, createdAt: now, updatedAt: now,
            lastRefreshAt: now, accessExpiresAt: session.accessExpiresAt, refreshExpiresAt: session.refreshExpiresAt,
            refreshStartedAt: nil)
        let secrets = AccountSecrets(accessToken: session.accessJwt, refreshToken: session.refreshJwt)
        let (saved, _) = try await register(record, secrets: secrets)
        if isFirst || makeDefault { return try await setDefault(saved.id.uuidString) }
        return saved
    }

    static func loginError(_ error: SessionError) -> DaemonError {
        switch error {
        case .authFactorTokenRequired(let message): .authFactorTokenRequired(message)
        case .authenticationFailed(let reason), .rejected(let reason), .expiredToken(let reason):
            .authenticationFailed(reason)
        case .transient(let reason, _), .noAnswer(let reason), .protocolViolation(let reason): .upstreamUnavailable(reason)
        }
    }

    /// Ends the server session when possible, then forgets the account and its secrets.
    func remove(_ reference: String) async throws(DaemonError) -> (AccountRecord, serverSessionEnded: Bool) {
        let session = try registry.session(reference)
        let ended = await session.endServerSession()
        let record = await session.record
        do {
            try store.delete(id: record.id)
        } catch {
            throw .internalError("cannot delete the account: \(error)")
        }
        registry.remove(record)
        await scheduler.schedule(record.id, at: nil)
        logger.info("account removed", metadata: ["account": "\(record.id.uuidString.lowercased())", "did": "\(record.did)"])
        return (record, ended)
    }

    func setDefault(_ reference: String) async throws(DaemonError) -> AccountRecord {
        let session = try registry.session(reference)
        let previous = registry.defaultID.flatMap { try? registry.session($0.uuidString) }
        do {
            try store.setDefault(id: session.id)
        } catch {
            throw .internalError("cannot change the default account: \(error)")
        }
        registry.setDefault(session.id)
        if let previous, previous !== session {
            var old = await previous.record
            old.isDefault = false
            await previous.update(record: old)
        }
        var record = await session.record
        record.isDefault = true
        await session.update(record: record)
        return record
    }

    func refreshNow(_ reference: String?) async throws(DaemonError) -> AccountRecord {
        let session = try registry.session(reference)
        try await session.refresh()
        // Asked for by a person: look at the DID document now (a new handle or PDS).
        await session.sharedIdentityCheck(minimumInterval: 0) { await self.recheckIdentity(of: session) }
        await scheduler.schedule(session.id, at: await session.nextRefreshDate())
        return await session.record
    }
}
