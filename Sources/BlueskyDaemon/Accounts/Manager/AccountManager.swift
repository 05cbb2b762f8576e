import ATIdentity
import ATSyntax
import AccountStoreCore
import Foundation
import JSONRPC
import Logging
import XRPC

/// Adds, removes and looks after accounts: the registry, the store and the schedule together.
final class AccountManager: Sendable {
    var registry: AccountRegistry { environment.registry }
    let store: any AccountStore
    let scheduler: RefreshScheduler
    let environment: SessionEnvironment
    let identity: IdentityResolver
    let logger: Logger
    /// Identity rechecks, profile fetches and the like, run beside the refreshes rather than in
    /// their slots, and ended before the store closes.
    var background: BackgroundWork { environment.background }
    let defaultSwitch = AsyncLock()

    init(store: any AccountStore, scheduler: RefreshScheduler, environment: SessionEnvironment, identity: IdentityResolver) {
        self.store = store
        self.scheduler = scheduler
        self.environment = environment
        self.identity = identity
        self.logger = environment.logger
    }

    /// The scheduler's action: upkeep of one account (a pending save, a refresh). Failures are
    /// recorded and logged by the session, and the date it is next due follows from them.
    func upkeep(_ id: UUID, _ call: AccountSession.UpkeepCall) async {
        guard let session = try? registry.session(id.uuidString) else { return }
        await session.upkeep(call)
        if await session.record.state == .active { await recheckIdentityIfDue(of: session) }
    }

    /// Hands accounts taken from the shared schedule, as the take read them, to their
    /// sessions: their upkeep starts from the stored row without reading it again. An account
    /// this host does not know is left (it falls due again after the lease).
    func adoptTaken(_ taken: [TakenAccount]) async {
        for account in taken {
            guard let session = try? registry.session(account.record.id.uuidString) else { continue }
            await session.adoptTaken(account)
        }
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
        let isFirst = registry.needsDefault
        let record = AccountRecord(
            id: UUID(), did: did, handle: resolved.handle?.description ?? session.handle,
            handleVerified: resolved.handleVerified, pds: resolved.pds.absoluteString, authKind: .appPassword,
            state: .active, stateReason: nil, isDefault: false, createdAt: now, updatedAt: now,
            lastRefreshAt: now, accessExpiresAt: session.accessExpiresAt, refreshExpiresAt: session.refreshExpiresAt,
            refreshStartedAt: nil)
        let secrets = AccountSecrets(accessToken: session.accessJwt, refreshToken: session.refreshJwt)
        let (saved, _, _) = try await register(record, secrets: secrets)
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
            try await store.delete(id: record.id)
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
            try await store.setDefault(id: session.id, at: environment.now())
        } catch {
            throw .internalError("cannot change the default account: \(error)")
        }
        // The new default first: the registry, following the records, always has one. Each
        // session applies the change alone to its current state (a refresh that finished
        // meanwhile keeps what it changed).
        await session.defaultChanged(true)
        if let previous, previous !== session { await previous.defaultChanged(false) }
        return await session.record
    }

    /// `accounts.refresh`: during the account's backoff this says when the next try is,
    /// unless `force` asks for a try now.
    func refreshNow(_ reference: String?, force: Bool = false) async throws(DaemonError) -> AccountRecord {
        let session = try registry.session(reference)
        try await session.refresh(force: force)
        // Asked for by a person: look at the DID document now (a new handle or PDS).
        await session.sharedIdentityCheck(minimumInterval: 0) { await self.recheckIdentity(of: session) }
        await refreshProfile(of: session)
        return await session.record
    }
}

extension AccountManager {
    /// At a stop, after the last refresh ended: rotated tokens the store refused are tried once
    /// more; those it still refuses are lost with this process, and said so at error, account
    /// by account (an app password's grace period may recover it; an OAuth session then needs a
    /// new login).
    func saveBeforeStop() async {
        let holding = environment.unsaved.withLock { $0 }
        for id in holding {
            guard let session = try? registry.session(id.uuidString) else { continue }
            do {
                try await session.saveUnsavedTokens()
            } catch {
                let record = await session.record
                logger.error("rotated tokens could not be saved and are lost with this stop", metadata: [
                    "account": "\(id.uuidString.lowercased())", "did": "\(record.did)", "auth": "\(record.authKind.rawValue)",
                    "reason": "\(error.description)", "outcome": "tokens-lost",
                ])
            }
        }
    }
}
