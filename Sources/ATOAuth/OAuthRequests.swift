import Foundation

/// The parameters of one authorization request, pushed to the PAR endpoint (RFC 9126).
public struct AuthorizationRequest: Sendable {
    public var clientID: String
    public var redirectURI: String
    public var scope: String
    public var state: String
    public var pkce: PKCE
    /// A handle or DID to pre-fill the login form with.
    public var loginHint: String?

    public init(clientID: String, redirectURI: String, scope: String, state: String, pkce: PKCE, loginHint: String? = nil) {
        self.clientID = clientID
        self.redirectURI = redirectURI
        self.scope = scope
        self.state = state
        self.pkce = pkce
        self.loginHint = loginHint
    }

    /// The PAR body: `response_type=code`, the client, redirect URI, scope, state, the S256
    /// challenge and the login hint; client authentication adds `client_id` (and, for
    /// confidential clients, the assertion).
    public func pushedAuthorizationForm(client: ClientAuthentication, issuer: String, now: Date = Date())
        throws(ClientAssertionError) -> FormBody
    {
        var form = FormBody([("response_type", "code")])
        try client.authenticate(&form, issuer: issuer, now: now)
        form.append("redirect_uri", redirectURI)
        form.append("scope", scope)
        form.append("state", state)
        form.append("code_challenge", pkce.challenge)
        form.append("code_challenge_method", PKCE.method)
        form.append("login_hint", loginHint)
        return form
    }
}

/// The other requests of the flow.
public enum OAuthRequests {
    /// Where to send the user's browser after PAR: only `client_id` and `request_uri`, as the
    /// rest of the request is already on the server.
    public static func authorizationURL(endpoint: URL, clientID: String, requestURI: String) -> URL? {
        guard var components = URLComponents(url: endpoint, resolvingAgainstBaseURL: false) else { return nil }
        // Keep any query the endpoint already has; add ours percent-encoded (%20, never '+').
        let existing = components.percentEncodedQuery.map { $0 + "&" } ?? ""
        components.percentEncodedQuery = existing
            + "client_id=" + FormEncoding.percentEncode(clientID, spaceAsPlus: false)
            + "&request_uri=" + FormEncoding.percentEncode(requestURI, spaceAsPlus: false)
        return components.url
    }

    /// Exchanges the callback's `code` (RFC 6749 §4.1.3 with PKCE): sent with a DPoP proof from
    /// the SAME key as the PAR request.
    public static func authorizationCodeForm(code: String, redirectURI: String, codeVerifier: String,
                                             client: ClientAuthentication, issuer: String, now: Date = Date())
        throws(ClientAssertionError) -> FormBody
    {
        var form = FormBody([("grant_type", "authorization_code"), ("code", code),
                             ("redirect_uri", redirectURI), ("code_verifier", codeVerifier)])
        try client.authenticate(&form, issuer: issuer, now: now)
        return form
    }

    /// Rotates the tokens (RFC 6749 §6). The refresh token is single-use: never send two of
    /// these for one session at once.
    public static func refreshForm(refreshToken: String, client: ClientAuthentication, issuer: String,
                                   now: Date = Date()) throws(ClientAssertionError) -> FormBody {
        var form = FormBody([("grant_type", "refresh_token"), ("refresh_token", refreshToken)])
        try client.authenticate(&form, issuer: issuer, now: now)
        return form
    }

    /// Revokes one token (RFC 7009); on logout, the refresh token and the access token.
    public static func revocationForm(token: String, tokenTypeHint: TokenTypeHint?, client: ClientAuthentication,
                                      issuer: String, now: Date = Date()) throws(ClientAssertionError) -> FormBody {
        var form = FormBody([("token", token)])
        form.append("token_type_hint", tokenTypeHint?.rawValue)
        try client.authenticate(&form, issuer: issuer, now: now)
        return form
    }

    public enum TokenTypeHint: String, Sendable {
        case accessToken = "access_token"
        case refreshToken = "refresh_token"
    }
}

/// The PAR endpoint's answer (RFC 9126 §2.2).
public struct PushedAuthorizationResponse: Sendable, Equatable {
    /// The reference to the stored request, for the authorization URL.
    public var requestURI: String
    /// Seconds the reference stays valid (about 5 minutes on the reference server).
    public var expiresIn: Int

    public init(requestURI: String, expiresIn: Int) {
        self.requestURI = requestURI
        self.expiresIn = expiresIn
    }
}
