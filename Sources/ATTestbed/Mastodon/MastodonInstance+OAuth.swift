import Crypto
import Foundation
import JSONRPC
import NIOHTTP1
import WebBasics

/// App registration, authorization, tokens and revocation, as Mastodon (Doorkeeper) answers them.
extension MastodonInstance {
    /// `POST /api/v1/apps`: a form or JSON body with `client_name`, `redirect_uris` (one per line
    /// or space, or an array), `scopes` (default `read`) and `website`.
    func registerApp(_ request: TestbedRequest) throws(OAuthFailure) -> TestbedResponse {
        let fields = try Self.fields(request)
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
        let id = store.records.withLock { state in
            state.apps[clientID] = app
            state.stats.appsRegistered += 1
            return String(state.stats.appsRegistered)
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
        let clientID = try Self.required("client_id", in: query)
        let redirectURI = try Self.required("redirect_uri", in: query)
        guard let app = store.records.withLock({ $0.apps[clientID] }) else { throw OAuthFailure(.unauthorized, "invalid_client", "Client authentication failed due to unknown client") }
        guard app.redirectURIs.contains(redirectURI) else { throw .invalidRequest("The redirect uri included is not valid.") }
        let scope = query["scope"] ?? "read"
        guard scope.split(separator: " ").allSatisfy({ app.scopes.contains(String($0)) }) else {
            return Self.redirect(redirectURI, [("error", "invalid_scope"), ("state", query["state"])])
        }
        guard query["code_challenge_method"] == "S256", let challenge = query["code_challenge"], !challenge.isEmpty else {
            throw .invalidRequest("code_challenge with code_challenge_method S256 is required")
        }
        let now = context.clock.now()
        let code = Encodings.randomToken(bytes: 24)
        let approved = store.records.withLock { state -> Bool in
            guard let userID = state.defaultUserID ?? state.users.keys.sorted().first else { return false }
            let grant = MastodonState.Grant(id: Encodings.randomToken(), clientID: clientID, userID: userID, scope: scope)
            state.codes[code] = MastodonState.IssuedCode(grant: grant, redirectURI: redirectURI, challenge: challenge,
                                           expiresAt: now.addingTimeInterval(600))
            state.stats.authorizations += 1
            return true
        }
        guard approved else { return Self.redirect(redirectURI, [("error", "access_denied"), ("state", query["state"])]) }
        return Self.redirect(redirectURI, [("code", code), ("state", query["state"])])
    }

    /// `POST /oauth/token`: `authorization_code` (with `code_verifier`) or `refresh_token`;
    /// each refresh token is used once and replaced.
    func token(_ request: TestbedRequest) throws(OAuthFailure) -> TestbedResponse {
        let fields = try Self.fields(request).compactMapValues(\.first)
        let (clientID, secret) = Self.clientCredentials(request, fields)
        let now = context.clock.now()
        return try store.records.withLock { state throws(OAuthFailure) -> TestbedResponse in
            guard let clientID, let app = state.apps[clientID], app.secret == secret else {
                throw OAuthFailure(.unauthorized, "invalid_client", "Client authentication failed due to unknown client, no client authentication included, or unsupported authentication method.")
            }
            let grant: MastodonState.Grant
            switch fields["grant_type"] {
            case "authorization_code":
                guard let code = fields["code"], let issued = state.codes.removeValue(forKey: code), issued.grant.clientID == clientID,
                      issued.expiresAt > now, issued.redirectURI == fields["redirect_uri"] else {
                    throw .invalidGrant("The provided authorization grant is invalid, expired, revoked, does not match the redirection URI used in the authorization request, or was issued to another client.")
                }
                let verifier = Array((fields["code_verifier"] ?? "").utf8)
                guard Base64URL.encode(SHA256.hash(data: verifier)) == issued.challenge else {
                    throw .invalidGrant("The provided authorization grant is invalid: the code verifier does not match")
                }
                grant = issued.grant
                state.stats.codeExchanges += 1
            case "refresh_token":
                let presented = fields["refresh_token"] ?? ""
                guard let found = state.refreshTokens.removeValue(forKey: presented), found.clientID == clientID else {
                    if state.spentRefreshTokens.contains(presented) { state.stats.refreshTokenReplays += 1 }
                    throw .invalidGrant("The provided authorization grant is invalid, expired, revoked, does not match the redirection URI used in the authorization request, or was issued to another client.")
                }
                state.spentRefreshTokens.insert(presented)
                grant = found
                state.stats.refreshes += 1
            default:
                throw OAuthFailure(.badRequest, "unsupported_grant_type", "The authorization grant type is not supported by the authorization server.")
            }
            let lifetime = store.accessTokenLifetime.withLock { $0 }
            let access = Encodings.randomToken(bytes: 32)
            let refresh = Encodings.randomToken(bytes: 32)
            state.accessTokens[access] = MastodonState.AccessToken(grant: grant, expiresAt: now.addingTimeInterval(lifetime.seconds))
            state.refreshTokens[refresh] = grant
            return .json([
                "access_token": .string(access), "token_type": "Bearer", "scope": .string(grant.scope),
                "created_at": .number(now.timeIntervalSince1970.rounded(.down)),
                "expires_in": .number(lifetime.seconds.rounded()), "refresh_token": .string(refresh),
            ])
        }
    }

    /// `POST /oauth/revoke` (RFC 7009): the token's whole grant ends; 200 whatever the token.
    func revoke(_ request: TestbedRequest) throws(OAuthFailure) -> TestbedResponse {
        let fields = try Self.fields(request).compactMapValues(\.first)
        let (clientID, secret) = Self.clientCredentials(request, fields)
        try store.records.withLock { state throws(OAuthFailure) in
            guard let clientID, let app = state.apps[clientID], app.secret == secret else {
                throw OAuthFailure(.unauthorized, "invalid_client", "Client authentication failed")
            }
            let token = fields["token"] ?? ""
            guard let grantID = state.accessTokens[token]?.grant.id ?? state.refreshTokens[token]?.id else { return }
            state.accessTokens = state.accessTokens.filter { $0.value.grant.id != grantID }
            state.refreshTokens = state.refreshTokens.filter { $0.value.id != grantID }
            state.stats.revocations += 1
        }
        return .json([:])
    }

    // MARK: Forms

    /// A form or JSON body's fields (a JSON array gives several values).
    static func fields(_ request: TestbedRequest) throws(OAuthFailure) -> [String: [String]] {
        let type = request.headers.first(name: "content-type")?.lowercased() ?? ""
        if type.hasPrefix("application/json") {
            guard case .object(let object)? = try? JSONValue.parse(request.bodyBytes) else { throw .invalidRequest("The body is not a JSON object") }
            return object.compactMapValues { value in
                if case .array(let items) = value { return items.compactMap(\.stringValue) }
                return value.stringValue.map { [$0] }
            }
        }
        var fields: [String: [String]] = [:]
        for (name, value) in TestbedRequest.parsePairs(Substring(String(decoding: request.bodyBytes, as: UTF8.self))) {
            fields[name.hasSuffix("[]") ? String(name.dropLast(2)) : name, default: []].append(value)
        }
        return fields
    }

    static func required(_ name: String, in fields: [String: String]) throws(OAuthFailure) -> String {
        guard let value = fields[name], !value.isEmpty else { throw .invalidRequest("Missing required parameter: \(name).") }
        return value
    }

    /// `client_secret_basic` or `client_secret_post`.
    static func clientCredentials(_ request: TestbedRequest, _ fields: [String: String]) -> (id: String?, secret: String?) {
        if let header = request.headers.first(name: "authorization"), header.lowercased().hasPrefix("basic "),
           let decoded = Data(base64Encoded: String(header.dropFirst(6))).map({ String(decoding: $0, as: UTF8.self) }),
           let colon = decoded.firstIndex(of: ":") {
            return (PercentDecoding.decode(decoded[..<colon], plusIsSpace: true),
                    PercentDecoding.decode(decoded[decoded.index(after: colon)...], plusIsSpace: true))
        }
        return (fields["client_id"], fields["client_secret"])
    }

    static func redirect(_ uri: String, _ parameters: [(String, String?)]) -> TestbedResponse {
        let query = parameters.compactMap { name, value in value.map { name + "=" + AuthorizationServer.percentEncode($0) } }
            .joined(separator: "&")
        return TestbedResponse(status: .found, headers: ["Location": uri + (uri.contains("?") ? "&" : "?") + query])
    }
}
