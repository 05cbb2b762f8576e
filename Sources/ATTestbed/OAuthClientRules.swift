import DPoP
import Foundation

/// What the authorization server knows about a client: where it may be redirected, which
/// scopes it may ask for, and, for a confidential client, the keys its assertions are signed with.
///
/// Two kinds are accepted: the atproto development (loopback) client, `client_id` exactly
/// `http://localhost` with optional `redirect_uri` (repeatable) and `scope` (once) query
/// parameters, redirects on `127.0.0.1` or `[::1]` matched ignoring the port; and hosted
/// clients whose metadata document the testbed serves itself (`OAuthClientRules+Hosted`).
struct OAuthClientRules: Sendable {
    let clientID: String
    let redirectURIs: [String]
    let scope: String
    let isLoopback: Bool
    /// A confidential (`private_key_jwt`) client's public keys by `kid`; empty for public clients.
    let signingKeys: [String: PublicJWK]

    var isConfidential: Bool { !signingKeys.isEmpty }

    /// The reference server's defaults when the client_id names no redirect URI or scope.
    static let defaultRedirectURIs = ["http://127.0.0.1/", "http://[::1]/"]
    static let defaultScope = "atproto"

    init(clientID: String, redirectURIs: [String], scope: String, isLoopback: Bool, signingKeys: [String: PublicJWK]) {
        self.clientID = clientID
        self.redirectURIs = redirectURIs
        self.scope = scope
        self.isLoopback = isLoopback
        self.signingKeys = signingKeys
    }

    /// The rules for `clientID`: a loopback client, or a hosted one from `directory`.
    static func resolve(_ clientID: String, directory: OAuthClientDirectory, clientsOrigin: String)
        throws(OAuthFailure) -> OAuthClientRules
    {
        if clientID.hasPrefix("https://") {
            return try hosted(clientID, directory: directory, clientsOrigin: clientsOrigin)
        }
        return try loopback(clientID)
    }

    static func loopback(_ clientID: String) throws(OAuthFailure) -> OAuthClientRules {
        guard clientID.hasPrefix("http://localhost") else {
            throw .invalidClient("client_id must be http://localhost or an https URL")
        }
        let rest = clientID.dropFirst("http://localhost".count)
        guard rest.isEmpty || rest.hasPrefix("?") else {
            throw .invalidClient("Loopback client_id must not have a port or a path")
        }
        var redirectURIs: [String] = []
        var scopes: [String] = []
        for (name, value) in TestbedRequest.parsePairs(rest.dropFirst()) {
            switch name {
            case "redirect_uri": redirectURIs.append(value)
            case "scope": scopes.append(value)
            default: throw .invalidClient("Loopback client_id may only have redirect_uri and scope parameters")
            }
        }
        guard scopes.count <= 1 else { throw .invalidClient("Loopback client_id has scope more than once") }
        for uri in redirectURIs where !isLoopbackRedirect(uri) {
            throw .invalidClient("Loopback redirect URIs must be http://127.0.0.1 or http://[::1], not \(uri)")
        }
        return OAuthClientRules(
            clientID: clientID, redirectURIs: redirectURIs.isEmpty ? defaultRedirectURIs : redirectURIs,
            scope: scopes.first ?? defaultScope, isLoopback: true, signingKeys: [:])
    }

    static func isLoopbackRedirect(_ uri: String) -> Bool {
        guard let url = URLComponents(string: uri), url.scheme == "http", let host = url.host else { return false }
        return host == "127.0.0.1" || host == "::1" || host == "[::1]"
    }

    /// Whether `uri` is one of the client's redirect URIs. Loopback redirects are matched
    /// ignoring the port (RFC 8252 §7.3), everything else exactly.
    func allowsRedirect(to uri: String) -> Bool {
        if redirectURIs.contains(uri) { return true }
        guard Self.isLoopbackRedirect(uri), let wanted = Self.withoutPort(uri) else { return false }
        return redirectURIs.contains { Self.isLoopbackRedirect($0) && Self.withoutPort($0) == wanted }
    }

    /// Whether every scope asked for is one the client declared, and `atproto` is among them.
    func allowsScope(_ requested: String) -> Bool {
        let asked = requested.split(separator: " ")
        let declared = Set(scope.split(separator: " "))
        return asked.contains("atproto") && asked.allSatisfy(declared.contains)
    }

    private static func withoutPort(_ uri: String) -> String? {
        guard var components = URLComponents(string: uri), components.host != nil else { return nil }
        components.port = nil
        if components.path.isEmpty { components.path = "/" }
        return components.string
    }
}
