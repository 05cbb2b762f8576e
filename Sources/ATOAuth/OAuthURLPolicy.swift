import BlueskyHTTP
import Foundation
import WebBasics

/// Which URLs discovery accepts for servers and endpoints: https always, plain http only to a
/// loopback host and only when development mode allows it (a local PDS, the testbed).
public struct OAuthURLPolicy: Sendable, Equatable {
    public var allowInsecureLoopback: Bool

    public init(allowInsecureLoopback: Bool = false) {
        self.allowInsecureLoopback = allowInsecureLoopback
    }

    /// The parts of an absolute URL that the checks need, or nil when it is not one.
    struct Parts {
        var scheme: String
        var host: String
        var port: Int?
        var path: String
        var hasQuery: Bool
        var hasFragment: Bool
        var hasUserInfo: Bool
    }

    static func parts(_ text: String) -> Parts? {
        // The host as written: a decoded one ("localhost%2583" → "localhost%83") would give an
        // origin that does not parse back to itself, and no server's name has a "%" in it
        // (both found by fuzzing, docs/FUZZING.md).
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
              let host = components.percentEncodedHost, !host.isEmpty, !host.contains("%"), components.host != nil
        else { return nil }
        return Parts(scheme: scheme, host: host, port: components.port, path: components.percentEncodedPath,
                     hasQuery: components.percentEncodedQuery != nil, hasFragment: components.fragment != nil,
                     hasUserInfo: components.user != nil || components.password != nil)
    }

    /// True when `text` may be contacted: https, or http to loopback when allowed.
    func allowsScheme(of parts: Parts) -> Bool {
        parts.scheme == "https" || (parts.scheme == "http" && allowInsecureLoopback && HTTPPolicy.isLoopback(host: parts.host))
    }

    /// Checks that `text` is an origin (`https://host[:port]`, nothing after, not even `/`), as
    /// an issuer identifier must be. Throws the rule it breaks.
    func checkOrigin(_ text: String, role: OAuthMetadataError.Role) throws(OAuthMetadataError) {
        guard let parts = Self.parts(text), parts.scheme == "https" || parts.scheme == "http" else {
            throw .invalidURL(role, text)
        }
        guard allowsScheme(of: parts) else { throw .insecureURL(role, text) }
        guard parts.path.isEmpty, !parts.hasQuery, !parts.hasFragment, !parts.hasUserInfo else {
            throw .notAnOrigin(role, text)
        }
    }

    /// Checks an endpoint URL: absolute, allowed scheme, no fragment.
    func checkEndpoint(_ text: String?, role: OAuthMetadataError.Role) throws(OAuthMetadataError) -> URL {
        guard let text else { throw .missingEndpoint(role) }
        guard let parts = Self.parts(text), parts.scheme == "https" || parts.scheme == "http",
              !parts.hasFragment, let url = URL(string: text) else { throw .invalidURL(role, text) }
        guard allowsScheme(of: parts) else { throw .insecureURL(role, text) }
        return url
    }

    /// `scheme://host[:port]` of an http(s) URL, with the default port left out, as servers
    /// write their `resource` and `issuer`: spelled by ``URLOrigin``, like the origins that key
    /// DPoP nonces, so an account's PDS and its nonces agree.
    public static func origin(of url: URL) -> String? {
        guard let parts = parts(url.absoluteString) else { return nil }
        return URLOrigin(scheme: parts.scheme, host: parts.host, port: parts.port)?.string
    }
}
