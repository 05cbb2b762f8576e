import ATOAuth
import AccountStoreCore
import Foundation
import OAuth2Client

/// Logins at other OAuth 2.0 servers: discovery (or a `[[provider]]`), registration (reused
/// from the server's other accounts), the authorization code with PKCE through the same
/// loopback listener and paste flow as atproto logins, then the exchange, the profile that
/// names the account, and the account stored.
extension AccountManager {
    /// The OAuth 2.0 server `identifier` names when it is no atproto one: a `[[provider]]`
    /// (name or issuer), or the server of an `oauth2` account being logged in again.
    func oauth2Provider(for identifier: String, upgrading record: AccountRecord?) -> (issuer: String, provider: ProviderSettings?)? {
        if let provider = environment.oauth.providers.provider(named: identifier) { return (provider.issuer, provider) }
        if let record, record.authKind == .oauth2, let issuer = record.oauth?.issuer {
            return (issuer, environment.oauth.providers.provider(named: issuer))
        }
        return nil
    }

    /// Starts a login at `issuer`. `atprotoRefusal`: why the URL was not taken for an atproto
    /// server, told too when it is no OAuth 2.0 server either.
    func beginOAuth2Login(issuer: String, provider: ProviderSettings?, scope: String?, makeDefault: Bool,
                          upgrading record: AccountRecord?, atprotoRefusal: String? = nil) async throws(DaemonError) -> OAuthLoginStart {
        let oauth = environment.oauth
        let metadata = try await oauth2Metadata(issuer: issuer, provider: provider, atprotoRefusal: atprotoRefusal)
        let isMastodon = metadata.appRegistrationEndpoint != nil
        var scope = scope ?? record?.oauth?.scope ?? provider?.scope ?? (isMastodon ? "read write" : "")
        if scope.hasPrefix("+") {
            scope = Self.widened(record?.oauth?.scope ?? provider?.scope ?? "", by: String(scope.dropFirst()))
        }
        let (client, listener, redirectURI, registeredScope) = try await oauth2Client(for: metadata, provider: provider, scope: scope)
        let profile = Self.profileEndpoint(metadata: metadata, provider: provider)
        let apiOrigin = Self.urlOrigin(provider?.apiURL) ?? Self.urlOrigin(metadata.issuer) ?? metadata.issuer
        let plan = OAuth2LoginPlan(request: AuthorizationCode(metadata: metadata, client: client, redirectURI: redirectURI, scope: scope),
                                   apiOrigin: apiOrigin, profileURL: profile?.url, profileFields: profile?.fields ?? [:],
                                   provider: provider?.name, registeredScope: registeredScope)
        let loginID = UUID().uuidString.lowercased()
        let attempt = OAuthLoginAttempt(id: loginID, state: plan.request.state, flow: .oauth2(plan), expectedDID: record?.did,
                                        makeDefault: makeDefault, startedAt: environment.now(), listener: listener)
        oauth.logins.add(attempt, authorization: nil)
        logger.info("oauth2 login started", metadata: [
            "login": "\(loginID)", "issuer": "\(metadata.issuer)", "provider": "\(provider?.name ?? "-")",
        ])
        return OAuthLoginStart(loginID: loginID, authorizationURL: plan.request.authorizationURL, redirectURI: redirectURI,
                               receivesRedirect: true)
    }

    private func oauth2Metadata(issuer: String, provider: ProviderSettings?, atprotoRefusal: String?) async throws(DaemonError) -> ProviderMetadata {
        let allowLoopback = environment.oauth.policy.allowInsecureLoopback
        do {
            if let configured = try provider?.configuredMetadata(allowInsecureLoopback: allowLoopback) { return configured }
            return try await ProviderDiscovery(http: environment.oauth.http, timeout: environment.oauth.timeout,
                                               allowInsecureLoopback: allowLoopback).discover(issuer: issuer)
        } catch {
            if case .unavailable(let reason, let retryAfter) = error { throw .upstreamUnavailable(reason, retryAfter: retryAfter) }
            if case .noAnswer(let reason) = error { throw .upstreamUnavailable(reason) }
            let detail = atprotoRefusal.map { "\(issuer) is not an atproto server (\($0)), nor a usable OAuth 2.0 server: " } ?? ""
            throw .oauthLogin(.metadataInvalid(detail + error.description))
        }
    }

    /// The client to present and the listener for its redirect: a configured client id; else
    /// the registration the server's other accounts use, when its redirect port can be bound
    /// again; else a new registration for a fresh port.
    private func oauth2Client(for metadata: ProviderMetadata, provider: ProviderSettings?, scope: String)
        async throws(DaemonError) -> (RegisteredClient, LoopbackCallbackListener, String, registeredScope: String?)
    {
        if let clientID = provider?.clientID {
            let client = RegisteredClient(clientID: clientID, clientSecret: provider?.clientSecret)
            if let redirect = provider?.redirectURI, let (port, path) = ProviderSettings.loopbackRedirect(redirect) {
                return (client, try await oauth2Listener(port: port, path: path), redirect, nil)
            }
            let listener = try await oauth2Listener(port: nil)
            return (client, listener, Self.redirectURI(port: listener.port), nil)
        }
        // The server's registration, when it covers the scope asked for and its redirect port is free.
        if let (clientID, facts) = await existingRegistration(issuer: metadata.issuer),
           Self.covers(facts.registeredScope, scope), let port = URL(string: facts.redirectURI)?.port,
           let listener = try? await oauth2Listener(port: port) {
            return (RegisteredClient(clientID: clientID, clientSecret: facts.clientSecret), listener, facts.redirectURI, facts.registeredScope)
        }
        let listener = try await oauth2Listener(port: nil)
        let redirectURI = Self.redirectURI(port: listener.port)
        do {
            let client = try await ClientRegistration(http: environment.oauth.http, timeout: environment.oauth.timeout)
                .register(at: metadata, clientName: environment.oauth.client.settings.clientName ?? "blueskyd", redirectURI: redirectURI,
                          scope: scope, website: environment.oauth.client.settings.clientURI)
            logger.info("registered at an OAuth 2.0 server", metadata: ["issuer": "\(metadata.issuer)", "client": "\(client.clientID)"])
            return (client, listener, redirectURI, scope)
        } catch {
            await listener.close()
            if case .unavailable(let reason, let retryAfter) = error { throw .upstreamUnavailable(reason, retryAfter: retryAfter) }
            if case .noAnswer(let reason) = error { throw .upstreamUnavailable(reason) }
            throw .oauthLogin(.serverRefused("registering at \(metadata.issuer): \(error.description)"))
        }
    }

    /// Whether a client registered for `registered` may ask for `wanted` (unknown: assumed so).
    static func covers(_ registered: String?, _ wanted: String) -> Bool {
        guard let registered else { return true }
        let granted = Set(registered.split(separator: " "))
        return wanted.split(separator: " ").allSatisfy(granted.contains)
    }

    /// The client id and registration facts of an account already signed in at `issuer`.
    private func existingRegistration(issuer: String) async -> (String, OAuth2SessionFacts)? {
        for session in registry.allSessions {
            if let found = await session.oauth2Registration(issuer: issuer) { return found }
        }
        return nil
    }

    /// `scheme://host[:port]` of a URL string.
    static func urlOrigin(_ url: String?) -> String? {
        url.flatMap(URL.init(string:)).flatMap(OAuthURLPolicy.origin(of:))
    }

    static func redirectURI(port: Int) -> String { "http://127.0.0.1:\(port)/callback" }

    /// The loopback listener on `port` (nil: any free one) for the browser's redirect.
    private func oauth2Listener(port: Int?, path: String = "/callback") async throws(DaemonError) -> LoopbackCallbackListener {
        do {
            return try await LoopbackCallbackListener.start(host: "127.0.0.1", port: port, path: path) { [weak self] query in
                guard let self else { return .init(status: .serviceUnavailable, text: "blueskyd is stopping.\n") }
                return await self.handleLoopbackCallback(query: query)
            }
        } catch {
            throw .oauthLogin(.callbackListenerUnavailable("127.0.0.1:\(port ?? 0): \(error)"))
        }
    }

    /// Where the signed-in person's profile is read, and how: a provider's, else Mastodon's
    /// `verify_credentials`, else OpenID's userinfo; nil when the server has none.
    static func profileEndpoint(metadata: ProviderMetadata, provider: ProviderSettings?) -> (url: URL, fields: [String: String])? {
        if let configured = provider?.profileURL, let url = URL(string: configured) {
            let isNeoDB = url.path.hasSuffix("/api/me")
            return (url, provider?.profileFields ?? (isNeoDB ? OAuth2ProfileFields.neoDB : OAuth2ProfileFields.openID))
        }
        if metadata.appRegistrationEndpoint != nil, let origin = urlOrigin(metadata.issuer),
           let url = URL(string: origin + "/api/v1/accounts/verify_credentials") {
            return (url, OAuth2ProfileFields.mastodon)
        }
        return metadata.userinfoEndpoint.map { ($0, OAuth2ProfileFields.openID) }
    }
}
