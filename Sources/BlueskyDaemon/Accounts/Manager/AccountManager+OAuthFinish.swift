import ATIdentity
import ATOAuth
import AccountStoreCore
import DPoP
import Foundation
import JSONRPC

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
            switch attempt.flow {
            case .atproto(let endpoints, let client):
                outcome = .success(try await exchangeAndStore(attempt, endpoints: endpoints, client: client, callback: callback))
            case .oauth2(let plan):
                outcome = .success(try await exchangeAndStore(attempt, plan: plan, callback: callback))
            }
        } catch {
            switch error {
            case .oauthLogin(let failure): outcome = .failure(failure)
            case .upstreamUnavailable(let reason, _), .identityResolutionFailed(let reason):
                outcome = .failure(.serverUnavailable(reason))
            default: outcome = .failure(.serverRefused(error.description))
            }
        }
        environment.oauth.nonces.forget(account: attempt.nonceScope)
        attempt.finish(outcome)
        // Let the listener answer the browser before it closes (a stop closes it at once).
        if let listener = attempt.listener {
            let started = background.start(.login) {
                try? await Task.sleep(for: .seconds(2))
                await listener.close()
            }
            if !started { await listener.close() }
        }
        switch outcome {
        case .success(let id):
            logger.info("oauth login completed", metadata: ["login": "\(attempt.id)", "account": "\(id.uuidString.lowercased())"])
            await loginCompleted(id, fields: ["login": .string(attempt.id), "method": "oauth"])
        case .failure(let failure):
            loginFailed(DaemonError.oauthLogin(failure).rpcError,
                        fields: ["login": .string(attempt.id), "method": "oauth"])
            logger.warning("oauth login failed", metadata: ["login": "\(attempt.id)", "error": "\(failure.name)",
                                                           "reason": "\(failure.message)"])
        }
        return outcome
    }

    private func exchangeAndStore(_ attempt: OAuthLoginAttempt, endpoints: AuthorizationServerEndpoints,
                                  client: OAuthLoginAttempt.OAuthLoginClient, callback: AuthorizationCallback) async throws(DaemonError) -> UUID {
        let oauth = environment.oauth
        let authorization: PendingAuthorization, code: String
        do {
            (authorization, code) = try oauth.logins.complete(callback, now: environment.now())
        } catch {
            throw .oauthLogin(OAuthLoginFailure(error))
        }
        let tokens: OAuthTokenSet
        do {
            tokens = try await oauth.serverClient(endpoints, authentication: client.authentication)
                .exchangeCode(code, for: authorization, nonceScope: attempt.nonceScope)
        } catch {
            throw .oauthLogin(OAuthLoginFailure(exchange: error))
        }
        let did = tokens.did.description
        let resolved = try await checkIssuerBinding(did: did, issuer: endpoints.issuer)
        oauth.nonces.move(from: attempt.nonceScope, to: did)
        let now = environment.now()
        let info = OAuthSessionInfo(
            issuer: endpoints.issuer, tokenEndpoint: endpoints.token.absoluteString,
            revocationEndpoint: endpoints.revocation?.absoluteString, scope: tokens.scope,
            sessionStartedAt: now, clientKind: client.kind, clientID: client.clientID,
            clientKeyID: client.keyID)
        let secrets = AccountSecrets(accessToken: tokens.accessToken, refreshToken: tokens.refreshToken,
                                     dpopPrivateKey: authorization.dpopKey.rawRepresentation)
        let record = AccountRecord(
            id: UUID(), did: did, handle: resolved.handle?.description, handleVerified: resolved.handleVerified,
            pds: resolved.pds.absoluteString, authKind: .oauth, state: .active, createdAt: now, updatedAt: now,
            lastRefreshAt: now, accessExpiresAt: tokens.expiresAt, refreshExpiresAt: info.sessionEndsAt, oauth: info)
        let (saved, _, _) = try await register(record, secrets: secrets)
        environment.nonceSaver.save(oauth.storedNonces(did: did, account: saved.id))
        if registry.needsDefault || attempt.makeDefault { _ = try await setDefault(saved.id.uuidString) }
        return saved.id
    }
}
