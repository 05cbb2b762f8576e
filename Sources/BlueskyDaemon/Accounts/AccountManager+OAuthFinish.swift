import ATIdentity
import ATOAuth
import BlueskyStore
import DPoP
import Foundation

/// The end of an OAuth login: the callback, the code exchange, the checks, and storing the
/// account atomically (or nothing).
extension AccountManager {
    /// Finishes `attempt` with `callback` (from the loopback listener or pasted), once.
    func finishOAuthLogin(_ attempt: OAuthLoginAttempt, callback: AuthorizationCallback) async -> Result<UUID, OAuthLoginFailure> {
        // A second redirect for the same login (opened twice, or pasted after the browser
        // delivered it) finds the state used.
        guard attempt.claim() else { return .failure(attempt.outcome == .failure(.cancelled) ? .cancelled : .stateReused) }
        let outcome: Result<UUID, OAuthLoginFailure>
        do {
            outcome = .success(try await exchangeAndStore(attempt, callback: callback))
        } catch {
            if case .oauthLogin(let failure) = error {
                outcome = .failure(failure)
            } else {
                outcome = .failure(.serverRefused(error.description))
            }
        }
        environment.oauth.nonces.forget(account: attempt.nonceScope)
        attempt.finish(outcome)
        // Let the listener answer the browser before it closes.
        Task { [listener = attempt.listener] in
            try? await Task.sleep(for: .seconds(2))
            await listener.close()
        }
        switch outcome {
        case .success(let id):
            logger.info("oauth login completed", metadata: ["login": "\(attempt.id)", "account": "\(id.uuidString.lowercased())"])
        case .failure(let failure):
            logger.warning("oauth login failed", metadata: ["login": "\(attempt.id)", "error": "\(failure.name)",
                                                           "reason": "\(failure.message)"])
        }
        return outcome
    }

    private func exchangeAndStore(_ attempt: OAuthLoginAttempt, callback: AuthorizationCallback) async throws(DaemonError) -> UUID {
        let oauth = environment.oauth
        let authorization: PendingAuthorization, code: String
        do {
            (authorization, code) = try oauth.pending.complete(callback, now: environment.now())
        } catch {
            throw .oauthLogin(OAuthLoginFailure(error))
        }
        let tokens: OAuthTokenSet
        do {
            tokens = try await oauth.serverClient(attempt.endpoints, clientID: attempt.clientID)
                .exchangeCode(code, for: authorization, nonceScope: attempt.nonceScope)
        } catch {
            throw .oauthLogin(OAuthLoginFailure(exchange: error))
        }
        let did = tokens.did.description
        let resolved = try await checkIssuerBinding(did: did, issuer: attempt.endpoints.issuer)
        oauth.nonces.move(from: attempt.nonceScope, to: did)
        let now = environment.now()
        let info = OAuthSessionInfo(
            issuer: attempt.endpoints.issuer, tokenEndpoint: attempt.endpoints.token.absoluteString,
            revocationEndpoint: attempt.endpoints.revocation?.absoluteString, scope: tokens.scope,
            sessionStartedAt: now, clientKind: .loopback, clientID: attempt.clientID)
        let secrets = AccountSecrets(accessToken: tokens.accessToken, refreshToken: tokens.refreshToken,
                                     dpopPrivateKey: authorization.dpopKey.rawRepresentation)
        var record = AccountRecord(
            id: UUID(), did: did, handle: resolved.handle?.description, handleVerified: resolved.handleVerified,
            pds: resolved.pds.absoluteString, authKind: .oauth, state: .active, createdAt: now, updatedAt: now,
            lastRefreshAt: now, accessExpiresAt: tokens.expiresAt, refreshExpiresAt: info.sessionEndsAt, oauth: info)
        let session: AccountSession
        if let existingID = registry.id(forDID: did), let existing = try? registry.session(existingID.uuidString) {
            // A known account (an upgrade from an app password, or a new login): same id, same default.
            let old = await existing.record
            record.id = old.id
            record.createdAt = old.createdAt
            record.isDefault = old.isDefault
            do {
                try store.replaceSession(record, secrets: secrets)
            } catch {
                throw .internalError("cannot save the account: \(error)")
            }
            await existing.adoptNewSession(record)
            session = existing
            logger.info("account signed in again with OAuth", metadata: ["account": "\(record.id.uuidString.lowercased())",
                                                                         "did": "\(did)", "was": "\(old.authKind.rawValue)"])
        } else {
            do {
                try store.insert(record, secrets: secrets)
            } catch {
                throw .internalError("cannot save the account: \(error)")
            }
            session = AccountSession(record: record, environment: environment)
            registry.insert(session, record: record)
            logger.info("account added", metadata: ["account": "\(record.id.uuidString.lowercased())", "did": "\(did)",
                                                    "auth": "oauth"])
        }
        try? store.saveDPoPNonces(oauth.storedNonces(did: did, account: record.id))
        await scheduler.schedule(record.id, at: await session.nextRefreshDate())
        if registry.defaultID == nil || attempt.makeDefault { _ = try await setDefault(record.id.uuidString) }
        return record.id
    }
}
