import ATIdentity
import ATSyntax
import BlueskyStore
import Foundation
import JSONRPC
import Logging
import XRPC

/// Adds, removes and looks after accounts: the registry, the store and the schedule together.
final class AccountManager: Sendable {
    var registry: AccountRegistry { environment.registry }
    let store: any AccountStorage
    let scheduler: RefreshScheduler
    let environment: SessionEnvironment
    let identity: IdentityResolver
    let logger: Logger
    /// The periodic identity rechecks, run beside the refreshes rather than in their slots.
    let backgroundChecks = BackgroundChecks(limit: 4)
    let defaultSwitch = AsyncLock()

    init(store: any AccountStorage, scheduler: RefreshScheduler, environment: SessionEnvironment, identity: IdentityResolver) {
        self.store = store
        self.scheduler = scheduler
        self.environment = environment
        self.identity = identity
        self.logger = environment.logger
    }

    /// The scheduler's action: upkeep of one account (a pending save, a refresh), and when it
    /// is due next. Failures are recorded and logged by the session; the date reflects them.
    func scheduledRefresh(_ id: UUID) async -> Date? {
        guard let session = try? registry.session(id.uuidString) else { return nil }
        let next = await session.scheduledUpkeep()
        if await session.record.state == .active { await recheckIdentityIfDue(of: session) }
        return next
    }

    /// Logs in with an app password and registers the account; the outcome is published.
    func addAppPasswordAccount(identifier: String, password: String, authFactorToken: String?,
                               makeDefault: Bool) async throws(DaemonError) -> AccountRecord {
        let login: [String: JSONValue] = ["method": "app-password", "identifier": .string(identifier)]
        do {
            let record = try await signIn(identifier: identifier, password: password, authFactorToken: authFactorToken,
                                          makeDefault: makeDefault)
            await loginCompleted(record.id, fields: login)
            return record
        } catch {
            loginFailed(error.rpcError, fields: login)
            throw error
        }
    }

    /// Publishes `login.completed` with the account as it now is.
    func loginCompleted(_ id: UUID, fields: [String: JSONValue]) async {
        guard let session = try? registry.session(id.uuidString) else { return }
        await session.publish(.loginCompleted, fields: fields)
    }

    /// Publishes `login.failed` with the error the caller was given (never a password).
    func loginFailed(_ error: RPCError, fields: [String: JSONValue]) {
        var fields = fields
        fields["error"] = .string(error.name)
        fields["message"] = .string(error.message)
        environment.events.publish(.loginFailed, fields: fields)
    }

    private func signIn(identifier: String, password: String, authFactorToken: String?,
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
        await forget(record, fields: ["serverSessionEnded": .bool(ended)])
        logger.info("account removed", metadata: ["account": "\(record.id.uuidString.lowercased())", "did": "\(record.did)"])
        return (record, ended)
    }

    func setDefault(_ reference: String) async throws(DaemonError) -> AccountRecord {
        // One change of default at a time: two interleaved ones could leave two records
        // flagged in memory while the store has one.
        await defaultSwitch.lock()
        defer { defaultSwitch.unlock() }
        let session = try registry.session(reference)
        let previous = registry.defaultID.flatMap { try? registry.session($0.uuidString) }
        do {
            try store.setDefault(id: session.id)
        } catch {
            throw .internalError("cannot change the default account: \(error)")
        }
        // The new default first: the registry, following the records, always has one.
        var record = await session.record
        record.isDefault = true
        await session.update(record: record)
        if let previous, previous !== session {
            var old = await previous.record
            old.isDefault = false
            await previous.update(record: old)
        }
        return record
    }

    /// `accounts.refresh`: during the account's backoff this says when the next try is,
    /// unless `force` asks for a try now.
    func refreshNow(_ reference: String?, force: Bool = false) async throws(DaemonError) -> AccountRecord {
        let session = try registry.session(reference)
        try await session.refresh(force: force)
        // Asked for by a person: look at the DID document now (a new handle or PDS).
        await session.sharedIdentityCheck(minimumInterval: 0) { await self.recheckIdentity(of: session) }
        await refreshProfile(of: session)
        await scheduler.schedule(session.id, at: await session.nextRefreshDate())
        return await session.record
    }
}
