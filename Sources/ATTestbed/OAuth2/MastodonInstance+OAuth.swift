import Foundation
import JSONRPC
import NIOHTTP1
import WebBasics

/// App registration, authorization, tokens and revocation, as Mastodon (Doorkeeper) answers them.
extension MastodonInstance {
    /// `POST /api/v1/apps`: a form or JSON body with `client_name`, `redirect_uris` (one per line
    /// or space, or an array), `scopes` (default `read`) and `website`.
    func registerApp(_ request: TestbedRequest) throws(OAuthFailure) -> TestbedResponse {
        let fields = try OAuth2Forms.fields(request)
        guard let name = fields["client_name"]?.first, !name.isEmpty else {
            return .json(["error": "Validation failed: Application name can't be blank"], status: .unprocessableEntity)
        }
        let redirects = (fields["redirect_uris"] ?? []).flatMap { $0.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init) }
        guard !redirects.isEmpty, redirects.allSatisfy({ URL(string: $0)?.scheme != nil }) else {
            return .json(["error": "Validation failed: Redirect URI must be an absolute URI."], status: .unprocessableEntity)
        }
        let scopes = Set((fields["scopes"]?.first ?? "read").split(separator: " ").map(String.init))
        let clientID = Encodings.randomToken(bytes: 24)
        let app = MastodonState.App(name: name, secret: Encodings.randomToken(bytes: 24), redirectURIs: redirects, scopes: scopes)
        let id = store.records.withLock { records in
            records.apps[clientID] = app
            return String(records.apps.count)
        }
        return .json([
            "id": .string(id), "name": .string(name), "website": fields["website"]?.first.map(JSONValue.string) ?? .null,
            "scopes": .array(scopes.sorted().map(JSONValue.string)),
            "redirect_uri": .string(redirects.joined(separator: "\n")), "redirect_uris": .array(redirects.map(JSONValue.string)),
            "client_id": .string(clientID), "client_secret": .string(app.secret), "vapid_key": "",
        ])
    }

    /// `GET /oauth/authorize`: approved at once for the default user, PKCE S256 required.
    func authorize(_ request: TestbedRequest) throws(OAuthFailure) -> TestbedResponse {
        let query = request.query
        guard query["response_type"] == "code" else { throw OAuthFailure(.badRequest, "unsupported_response_type", "Only code") }
        let clientID = try OAuth2Forms.required("client_id", in: query)
        let redirectURI = try OAuth2Forms.required("redirect_uri", in: query)
        guard let app = store.records.withLock({ $0.apps[clientID] }) else {
            throw OAuthFailure(.unauthorized, "invalid_client", "Client authentication failed due to unknown client")
        }
        guard app.redirectURIs.contains(redirectURI) else { throw .invalidRequest("The redirect uri included is not valid.") }
        let scope = query["scope"] ?? "read"
        guard scope.split(separator: " ").allSatisfy({ app.scopes.contains(String($0)) }) else {
            return OAuth2Forms.redirect(redirectURI, [("error", "invalid_scope"), ("state", query["state"])])
        }
        guard query["code_challenge_method"] == "S256", let challenge = query["code_challenge"], !challenge.isEmpty else {
            throw .invalidRequest("code_challenge with code_challenge_method S256 is required")
        }
        let now = context.clock.now()
        let code = store.records.withLock { records -> String? in
            guard let userID = records.defaultUserID ?? records.users.keys.sorted().first else { return nil }
            let grant = OAuth2GrantBook.Grant(id: Encodings.randomToken(), clientID: clientID, subject: userID, scope: scope)
            return records.grants.issueCode(for: grant, redirectURI: redirectURI, challenge: challenge, now: now)
        }
        guard let code else { return OAuth2Forms.redirect(redirectURI, [("error", "access_denied"), ("state", query["state"])]) }
        return OAuth2Forms.redirect(redirectURI, [("code", code), ("state", query["state"])])
    }

    /// `POST /oauth/token`: `authorization_code` (with `code_verifier`) or `refresh_token`;
    /// each refresh token is used once and replaced.
    func token(_ request: TestbedRequest) throws(OAuthFailure) -> TestbedResponse {
        let fields = try OAuth2Forms.fields(request).compactMapValues(\.first)
        let (clientID, secret) = OAuth2Forms.clientCredentials(request, fields)
        let now = context.clock.now()
        let production = store.asRunInProduction.withLock { $0 }
        let lifetime: Duration? = production ? nil : store.accessTokenLifetime.withLock { $0 }
        return try store.records.withLock { records throws(OAuthFailure) -> TestbedResponse in
            guard let clientID, let app = records.apps[clientID], app.secret == secret else {
                throw OAuthFailure(.unauthorized, "invalid_client", "Client authentication failed due to unknown client, no client authentication included, or unsupported authentication method.")
            }
            let grant = try records.grants.grant(for: fields, clientID: clientID, now: now)
            let access = Encodings.randomToken(bytes: 32)
            let expiresAt = lifetime.map { now.addingTimeInterval($0.seconds) } ?? .distantFuture
            let refresh = records.grants.issue(access: access, for: grant, expiresAt: expiresAt, withRefresh: !production)
            return OAuth2Forms.tokenAnswer(access: access, refresh: refresh, scope: grant.scope, lifetime: lifetime, now: now)
        }
    }

    /// `POST /oauth/revoke` (RFC 7009): the token's whole grant ends; 200 whatever the token.
    func revoke(_ request: TestbedRequest) throws(OAuthFailure) -> TestbedResponse {
        let fields = try OAuth2Forms.fields(request).compactMapValues(\.first)
        let (clientID, secret) = OAuth2Forms.clientCredentials(request, fields)
        try store.records.withLock { records throws(OAuthFailure) in
            guard let clientID, let app = records.apps[clientID], app.secret == secret else {
                throw OAuthFailure(.unauthorized, "invalid_client", "Client authentication failed")
            }
            records.grants.revoke(fields["token"] ?? "")
        }
        return .json([:])
    }
}
