import ATOAuth
import Foundation

/// One authorization-code login in progress: PKCE S256 and a single-use state, the URL the
/// browser opens, and the checks of the redirect it comes back with.
public struct AuthorizationCode: Sendable {
    public let metadata: ProviderMetadata
    public let client: RegisteredClient
    public let redirectURI: String
    public let scope: String
    public let pkce: PKCE
    public let state: String

    public init(metadata: ProviderMetadata, client: RegisteredClient, redirectURI: String, scope: String,
                pkce: PKCE = .generate(), state: String = SecureRandom.state()) {
        self.metadata = metadata
        self.client = client
        self.redirectURI = redirectURI
        self.scope = scope
        self.pkce = pkce
        self.state = state
    }

    /// The authorization endpoint with the request in its query.
    public var authorizationURL: URL {
        var components = URLComponents(url: metadata.authorizationEndpoint, resolvingAgainstBaseURL: false)!
        var items = components.queryItems ?? []
        items += [
            URLQueryItem(name: "response_type", value: "code"), URLQueryItem(name: "client_id", value: client.clientID),
            URLQueryItem(name: "redirect_uri", value: redirectURI),
        ]
        // No scope at all asks for the server's default (RFC 6749 §3.3); an empty one is not that.
        if !scope.isEmpty { items.append(URLQueryItem(name: "scope", value: scope)) }
        items += [
            URLQueryItem(name: "state", value: state), URLQueryItem(name: "code_challenge", value: pkce.challenge),
            URLQueryItem(name: "code_challenge_method", value: PKCE.method),
        ]
        components.percentEncodedQuery = items.map { FormEncoding.encode($0.name) + "=" + FormEncoding.encode($0.value ?? "") }
            .joined(separator: "&")
        return components.url!
    }

    /// The code of the redirect the browser came back with. Its `state` must be this login's,
    /// and its `iss` (RFC 9207) this server's: required when the server says it sends one,
    /// checked whenever present.
    public func code(fromRedirect url: String) throws(AuthorizationCallbackError) -> String {
        guard let components = URLComponents(string: url) else { throw .malformed("the redirect is not a URL") }
        var fields: [String: String] = [:]
        for item in components.queryItems ?? [] where fields[item.name] == nil { fields[item.name] = item.value ?? "" }
        return try code(fromFields: fields)
    }

    /// The same checks on the redirect's query, already read (`code`, `state`, `iss`, `error`,
    /// `error_description`).
    public func code(fromFields fields: [String: String]) throws(AuthorizationCallbackError) -> String {
        guard fields["state"] == state else { throw .stateMismatch }
        if let iss = fields["iss"] {
            guard ProviderMetadata.sameIssuer(iss, metadata.issuer) else { throw .issuerMismatch(expected: metadata.issuer, actual: iss) }
        } else if metadata.issuesIssInRedirect {
            throw .malformed("the redirect lacks iss, which \(metadata.issuer) says it sends (RFC 9207)")
        }
        if let error = fields["error"] {
            throw .denied(error + (fields["error_description"].map { ": \($0)" } ?? ""))
        }
        guard let code = fields["code"], !code.isEmpty else { throw .malformed("the redirect carries no code") }
        return code
    }
}

/// Why a redirect does not complete its login.
public enum AuthorizationCallbackError: Error, Sendable, Equatable, CustomStringConvertible {
    case malformed(String)
    /// Not this login's state: a stale or forged redirect.
    case stateMismatch
    case issuerMismatch(expected: String, actual: String)
    /// The user or the server refused (`access_denied`, `invalid_scope`…).
    case denied(String)

    public var description: String {
        switch self {
        case .malformed(let detail): "the redirect is unusable: \(detail)"
        case .stateMismatch: "the redirect's state is not this login's"
        case .issuerMismatch(let expected, let actual): "the redirect comes from issuer \(actual), not \(expected)"
        case .denied(let detail): "the authorization was refused: \(detail)"
        }
    }
}
