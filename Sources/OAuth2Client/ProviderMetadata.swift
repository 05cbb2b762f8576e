import BlueskyHTTP
import Foundation
import JSONRPC

/// What blueskyd needs to know of an OAuth 2.0 server: its endpoints and what it supports,
/// from RFC 8414 metadata (or OpenID discovery), or configured by hand.
public struct ProviderMetadata: Sendable, Equatable {
    public var issuer: String
    public var authorizationEndpoint: URL
    public var tokenEndpoint: URL
    public var revocationEndpoint: URL?
    /// RFC 7591 dynamic client registration.
    public var registrationEndpoint: URL?
    /// Mastodon's `POST /api/v1/apps` (its metadata's `app_registration_endpoint`).
    public var appRegistrationEndpoint: URL?
    /// The signed-in user's profile (OpenID's `userinfo_endpoint`).
    public var userinfoEndpoint: URL?
    /// RFC 9207: the redirect carries `iss`, which must then be checked.
    public var issuesIssInRedirect: Bool
    public var scopesSupported: [String]

    public init(issuer: String, authorizationEndpoint: URL, tokenEndpoint: URL, revocationEndpoint: URL? = nil,
                registrationEndpoint: URL? = nil, appRegistrationEndpoint: URL? = nil, userinfoEndpoint: URL? = nil,
                issuesIssInRedirect: Bool = false, scopesSupported: [String] = []) {
        self.issuer = issuer
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.registrationEndpoint = registrationEndpoint
        self.appRegistrationEndpoint = appRegistrationEndpoint
        self.userinfoEndpoint = userinfoEndpoint
        self.issuesIssInRedirect = issuesIssInRedirect
        self.scopesSupported = scopesSupported
    }

    /// Reads a metadata document. Its `issuer` must be the one asked for (RFC 8414 §3.3: a
    /// document naming another issuer is refused), and every endpoint an allowed URL.
    public init(document: JSONValue, expectedIssuer: String, allowInsecureLoopback: Bool) throws(OAuth2ClientError) {
        guard let issuer = document["issuer"]?.stringValue else { throw .invalidAnswer("the metadata has no issuer") }
        guard Self.sameIssuer(issuer, expectedIssuer) else {
            throw .invalidAnswer("the metadata names the issuer \(issuer), not \(expectedIssuer)")
        }
        // Mix-up: metadata fetched from one server naming another's endpoints would get that
        // server's token issued, then sent to the first (RFC 9700 §4.4). Every endpoint that
        // is contacted is therefore on the issuer's own origin; a server that truly splits
        // them is described in a [[provider]], where the operator names each endpoint.
        let issuerOrigin = Self.origin(of: URL(string: issuer))
        func endpoint(_ name: String) throws(OAuth2ClientError) -> URL? {
            guard let text = document[name]?.stringValue else { return nil }
            let url = try Self.checkedURL(text, allowInsecureLoopback: allowInsecureLoopback)
            guard let issuerOrigin, Self.origin(of: url) == issuerOrigin else {
                throw .invalidAnswer("the metadata's \(name) \(text) is not on the issuer's origin \(issuerOrigin ?? issuer); "
                                     + "a server whose endpoints live elsewhere is described in a [[provider]] that names them")
            }
            return url
        }
        guard let authorization = try endpoint("authorization_endpoint"), let token = try endpoint("token_endpoint") else {
            throw .invalidAnswer("the metadata lacks authorization_endpoint or token_endpoint")
        }
        if let methods = document["code_challenge_methods_supported"]?.arrayValue,
           !methods.contains(where: { $0.stringValue == "S256" }) {
            throw .invalidAnswer("the server does not support PKCE with S256")
        }
        self.init(issuer: issuer, authorizationEndpoint: authorization, tokenEndpoint: token,
                  revocationEndpoint: try endpoint("revocation_endpoint"), registrationEndpoint: try endpoint("registration_endpoint"),
                  appRegistrationEndpoint: try endpoint("app_registration_endpoint"), userinfoEndpoint: try endpoint("userinfo_endpoint"),
                  issuesIssInRedirect: document["authorization_response_iss_parameter_supported"]?.boolValue ?? false,
                  scopesSupported: document["scopes_supported"]?.arrayValue?.compactMap(\.stringValue) ?? [])
    }

    /// `scheme://host:port`, lowercased, the port always written.
    static func origin(of url: URL?) -> String? {
        guard let url, let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased(), !host.isEmpty else { return nil }
        let port = url.port ?? (scheme == "https" ? 443 : scheme == "http" ? 80 : -1)
        return "\(scheme)://\(host):\(port)"
    }

    /// Issuers compare as written, but a trailing `/` is no difference.
    static func sameIssuer(_ a: String, _ b: String) -> Bool {
        func trimmed(_ text: String) -> Substring { text.hasSuffix("/") ? text.dropLast() : text[...] }
        return trimmed(a) == trimmed(b)
    }

    /// `text` as a URL blueskyd may contact: absolute https, or http to loopback in development.
    public static func checkedURL(_ text: String, allowInsecureLoopback: Bool) throws(OAuth2ClientError) -> URL {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty,
              url.fragment == nil else { throw .insecureURL(text) }
        guard scheme == "https" || (scheme == "http" && allowInsecureLoopback && HTTPPolicy.isLoopback(host: host)) else {
            throw .insecureURL(text)
        }
        return url
    }
}
