import Foundation

/// What the authorization server knows about a client: where it may be redirected and which
/// scopes it may ask for.
///
/// Only the atproto development (loopback) client is accepted: `client_id` exactly
/// `http://localhost` with optional `redirect_uri` (repeatable) and `scope` (once) query
/// parameters; redirect URIs on `127.0.0.1` or `[::1]`, matched ignoring the port.
struct OAuthClientRules: Sendable {
    let clientID: String
    let redirectURIs: [String]
    let scope: String

    /// The reference server's defaults when the client_id names no redirect URI or scope.
    static let defaultRedirectURIs = ["http://127.0.0.1/", "http://[::1]/"]
    static let defaultScope = "atproto"

    init(clientID: String) throws(OAuthFailure) {
        guard clientID.hasPrefix("http://localhost") else {
            throw .invalidClient("Only loopback clients (http://localhost) are supported by this testbed")
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
        for uri in redirectURIs {
            guard let url = URL(string: uri), url.scheme == "http", let host = url.host,
                host == "127.0.0.1" || host == "::1" || host == "[::1]"
            else { throw .invalidClient("Loopback redirect URIs must be http://127.0.0.1 or http://[::1], not \(uri)") }
        }
        self.clientID = clientID
        self.redirectURIs = redirectURIs.isEmpty ? Self.defaultRedirectURIs : redirectURIs
        scope = scopes.first ?? Self.defaultScope
    }

    /// Whether `uri` is one of the client's redirect URIs, ports ignored (RFC 8252 §7.3).
    func allowsRedirect(to uri: String) -> Bool {
        guard let wanted = Self.withoutPort(uri) else { return false }
        return redirectURIs.contains { Self.withoutPort($0) == wanted }
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
