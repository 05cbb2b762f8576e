import ATIdentity
import ATOAuth
import ATSyntax
import BlueskyHTTP
import AccountStoreCore
import DPoP
import Foundation
import JSONRPC

/// OAuth login: discovery, PAR, the loopback callback, the code exchange, the issuer binding
/// check, and storing the account (new, or an existing one replaced in place).
extension AccountManager {
    /// What `accounts.oauth.begin` answers.
    struct OAuthLoginStart: Sendable {
        var loginID: String
        var authorizationURL: URL
        var redirectURI: String
        /// False when the user must paste the final redirect address (`accounts.oauth.complete`).
        var receivesRedirect: Bool
    }

    /// `granted` with each token of `added` not already in it, in order.
    static func widened(_ granted: String, by added: String) -> String {
        var tokens = OAuthScope.tokens(granted)
        for token in OAuthScope.tokens(added) where !tokens.contains(token) { tokens.append(token) }
        return tokens.joined(separator: " ")
    }

    /// Starts a login from a handle, a DID, or a PDS / entryway URL.
    /// - Parameter upgrading: an account to replace in place (same id, same default flag).
    func beginOAuthLogin(identifier: String, scope: String?, makeDefault: Bool, upgrading: String?)
        async throws(DaemonError) -> OAuthLoginStart
    {
        let oauth = environment.oauth
        pruneFinishedLogins()
        var upgradingRecord: AccountRecord?
        if let upgrading { upgradingRecord = await (try registry.session(upgrading)).record }
        if let (issuer, provider) = oauth2Provider(for: identifier, upgrading: upgradingRecord) {
            return try await beginOAuth2Login(issuer: issuer, provider: provider, scope: scope, makeDefault: makeDefault,
                                              upgrading: upgradingRecord)
        }
        var expectedDID: String?
        var scope = scope
        if let record = upgradingRecord {
            expectedDID = record.did
            // "+<scope>": the session's granted scope and the permissions added.
            if let added = scope, added.hasPrefix("+") {
                scope = Self.widened(record.oauth?.scope ?? oauth.client.settings.scope, by: String(added.dropFirst()))
            }
        } else if let added = scope, added.hasPrefix("+") {
            throw .invalidParams("a scope starting with + adds to an account's scope: name the account with --upgrade", field: "scope")
        }
        let discovery: OAuthDiscovery
        do {
            discovery = try await discover(identifier)
        } catch .oauthLogin(.metadataInvalid(let why)) where upgradingRecord == nil && identifier.lowercased().hasPrefix("https://") {
            // Not an atproto server: perhaps another OAuth 2.0 server (Mastodon, NeoDB, an SSO).
            return try await beginOAuth2Login(issuer: identifier, provider: nil, scope: scope, makeDefault: makeDefault,
                                              upgrading: nil, atprotoRefusal: why)
        }
        if let expectedDID, let found = discovery.did, found != expectedDID {
            throw .oauthLogin(.subjectMismatch(expected: expectedDID, actual: found))
        }
        expectedDID = expectedDID ?? discovery.did
        let loginID = UUID().uuidString.lowercased()
        let listener = try await startCallbackListener()
        let client: OAuthClientIdentity.LoginClient
        do {
            client = try oauth.client.loginClient(listenerPort: listener?.port, scope: scope)
        } catch {
            await listener?.close()
            throw error
        }
        let key = DPoPKey.generate()
        let pkce = PKCE.generate()
        let state = SecureRandom.state()
        let request = AuthorizationRequest(clientID: client.clientID, redirectURI: client.redirectURI, scope: client.scope,
                                           state: state, pkce: pkce, loginHint: discovery.loginHint)
        let attempt = OAuthLoginAttempt(id: loginID, state: state, flow: .atproto(discovery.endpoints, client),
                                        expectedDID: expectedDID, makeDefault: makeDefault,
                                        startedAt: environment.now(), listener: listener,
                                        onEnd: { [identity = oauth.client, keyID = client.keyID] in identity.release(keyID) })
        let pushed: PushedAuthorizationResponse
        do {
            pushed = try await oauth.serverClient(discovery.endpoints, authentication: client.authentication)
                .pushAuthorization(request, dpopKey: key, nonceScope: attempt.nonceScope)
        } catch {
            await listener?.close()
            oauth.nonces.forget(account: attempt.nonceScope)
            let failure: DaemonError = error.isTransient
                ? .upstreamUnavailable(error.description) : .oauthLogin(.serverRefused(error.description))
            attempt.finish(.failure(.serverRefused(error.description)))
            throw failure
        }
        guard let url = OAuthRequests.authorizationURL(endpoint: discovery.endpoints.authorization, clientID: client.clientID,
                                                       requestURI: pushed.requestURI) else {
            await listener?.close()
            attempt.finish(.failure(.serverRefused("no authorization URL")))
            throw .internalError("cannot build the authorization URL")
        }
        oauth.logins.add(attempt, authorization: PendingAuthorization(
            state: state, issuer: discovery.endpoints.issuer, pkce: pkce, redirectURI: client.redirectURI, dpopKey: key,
            expectedDID: expectedDID, createdAt: environment.now()))
        logger.info("oauth login started", metadata: [
            "login": "\(loginID)", "issuer": "\(discovery.endpoints.issuer)", "did": "\(expectedDID ?? "-")",
            "client": "\(client.kind.rawValue)",
        ])
        return OAuthLoginStart(loginID: loginID, authorizationURL: url, redirectURI: client.redirectURI,
                               receivesRedirect: listener != nil)
    }

    /// The loopback listener for the browser's redirect, or nil when the redirect goes to a web
    /// page (the user pastes the final address).
    private func startCallbackListener() async throws(DaemonError) -> LoopbackCallbackListener? {
        guard let target = environment.oauth.client.callbackListenTarget else { return nil }
        do {
            return try await LoopbackCallbackListener.start(host: target.host, port: target.port, path: target.path) { [weak self] query in
                guard let self else { return .init(status: .serviceUnavailable, text: "blueskyd is stopping.\n") }
                return await self.handleLoopbackCallback(query: query)
            }
        } catch {
            let address = target.host.contains(":") ? "[\(target.host)]" : target.host
            guard let port = target.port else {
                throw .oauthLogin(.callbackListenerUnavailable("\(address): \(error)"))
            }
            throw .oauthLogin(.callbackListenerUnavailable(
                "\(address):\(port): \(error) (is another program using the port of oauth_redirect_uri?)"))
        }
    }

    /// The login with this id.
    func oauthLogin(_ loginID: String) throws(DaemonError) -> OAuthLoginAttempt {
        guard let attempt = environment.oauth.logins.attempt(id: loginID) else {
            throw .oauthLogin(.loginNotFound(loginID))
        }
        return attempt
    }

    /// Waits for the login's outcome: the account, or the failure.
    func waitForOAuthLogin(_ loginID: String, timeout: Duration) async throws(DaemonError) -> UUID {
        let attempt = try oauthLogin(loginID)
        guard let outcome = await attempt.wait(timeout: timeout) else { throw .oauthLogin(.timedOut) }
        switch outcome {
        case .success(let id): return id
        case .failure(let failure): throw .oauthLogin(failure)
        }
    }

    /// Completes a login with the redirect URL the user pasted (`--no-browser`).
    func completeOAuthLogin(_ loginID: String, redirectURL: String) async throws(DaemonError) -> UUID {
        let attempt = try oauthLogin(loginID)
        let callback: AuthorizationCallback
        do {
            guard let url = URL(string: redirectURL.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw CallbackError.malformedQuery
            }
            callback = try AuthorizationCallback(redirectURL: url)
        } catch {
            throw .oauthLogin(.callbackInvalid("not a redirect URL with a query"))
        }
        // A state of another login (or none) is refused without consuming anything.
        if let state = callback.state, state != attempt.state {
            throw .oauthLogin(environment.oauth.logins.verdict(forStrayState: state))
        }
        switch await finishOAuthLogin(attempt, callback: callback) {
        case .success(let id): return id
        case .failure(let failure): throw .oauthLogin(failure)
        }
    }

    /// Cancels a login: its listener closes and waiters get `OAuthLoginCancelled`.
    func cancelOAuthLogin(_ loginID: String) async throws(DaemonError) {
        let attempt = try oauthLogin(loginID)
        if attempt.claim() {
            attempt.finish(.failure(.cancelled))
            loginFailed(DaemonError.oauthLogin(.cancelled).rpcError, fields: ["login": .string(loginID), "method": "oauth"])
            environment.oauth.nonces.forget(account: attempt.nonceScope)
            logger.info("oauth login cancelled", metadata: ["login": "\(loginID)"])
        }
        await attempt.listener?.close()
    }

    /// The browser's redirect to the loopback listener.
    func handleLoopbackCallback(query: String) async -> LoopbackCallbackListener.Page {
        let callback: AuthorizationCallback
        do {
            callback = try AuthorizationCallback(query: query)
        } catch {
            return .init(status: .badRequest, text: "Login failed: \(error.description)\n")
        }
        let attempt = callback.state.flatMap(environment.oauth.logins.attempt(state:))
        let outcome: Result<UUID, OAuthLoginFailure>
        if let attempt {
            outcome = await finishOAuthLogin(attempt, callback: callback)
        } else {
            outcome = .failure(environment.oauth.logins.verdict(forStrayState: callback.state ?? ""))
        }
        switch outcome {
        case .success: return .init(status: .ok, text: "You are logged in to blueskyd. You can close this tab.\n")
        case .failure(let failure): return .init(status: .badRequest, text: "Login failed: \(failure.message)\n")
        }
    }

    /// Forgets logins that ended (or were abandoned) long ago.
    func pruneFinishedLogins() {
        let stale = environment.oauth.logins.removeStale(now: environment.now())
        for attempt in stale {
            if attempt.claim() { attempt.finish(.failure(.expired)) }
            if let listener = attempt.listener, !background.start(.login, { await listener.close() }) {
                Task { await listener.close() }
            }
        }
    }
}
