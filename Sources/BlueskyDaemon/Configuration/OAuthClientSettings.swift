import ATOAuth
import AccountStoreCore
import Foundation

/// Which OAuth client blueskyd presents to authorization servers (the `oauth_*` keys).
///
/// Without `oauth_client_id` it is the atproto loopback development client, which needs no
/// publishing and gets 14-day sessions. With one, it is a hosted client whose metadata
/// document (`bskyctl client-metadata`) the user publishes at that URL; with
/// `oauth_client_auth = "private_key_jwt"` it is a confidential client whose sessions last up to
/// two years, authenticating with a signing key blueskyd creates and keeps encrypted.
public struct OAuthClientSettings: Sendable, Equatable {
    /// How a hosted client authenticates at the token endpoint.
    public enum Authentication: String, Sendable, Equatable, CaseIterable {
        case none
        case privateKeyJWT = "private_key_jwt"
    }

    /// The https URL of the published metadata document; nil for the loopback client.
    public var clientID: String?
    /// Where the authorization server sends the browser back. `http://127.0.0.1[:port]/path`
    /// (or `[::1]`) is served by blueskyd itself (a native app); an https URL is a web page of
    /// the user's, from which the final address is pasted into `bskyctl login`.
    public var redirectURI: String?
    public var authentication: Authentication
    /// The scope the document declares (logins may ask for less).
    public var scope: String
    public var clientName: String?
    public var clientURI: String?

    public init() {
        clientID = nil
        redirectURI = nil
        authentication = .none
        scope = "atproto transition:generic"
        clientName = nil
        clientURI = nil
    }

    /// The kind of client these settings make, as recorded with each session.
    public var kind: OAuthClientKind {
        guard clientID != nil else { return .loopback }
        return authentication == .privateKeyJWT ? .confidential : .hostedPublic
    }

    /// True when blueskyd receives the redirect itself on a loopback listener.
    public var receivesRedirect: Bool {
        guard let redirectURI else { return true }
        return Self.loopbackRedirect(redirectURI) != nil
    }

    /// The cross-key rules, checked at start: a hosted client needs an https `client_id` and a
    /// redirect URI; a confidential client redirects to an https page (servers refuse
    /// `private_key_jwt` for native apps); the scope contains `atproto`.
    public func validate() throws(ConfigurationError) {
        guard OAuthScope.contains(scope, "atproto") else {
            throw ConfigurationError("oauth_scope must contain atproto, not \"\(scope)\"")
        }
        guard let clientID else {
            for (key, value) in [("oauth_redirect_uri", redirectURI), ("oauth_client_name", clientName),
                                 ("oauth_client_uri", clientURI)] where value != nil {
                throw ConfigurationError("\(key) is set but oauth_client_id is not: the loopback development client has no metadata to set")
            }
            guard authentication == .none else {
                throw ConfigurationError("oauth_client_auth = \"private_key_jwt\" needs a hosted oauth_client_id")
            }
            return
        }
        guard let url = URLComponents(string: clientID), url.scheme == "https", url.host?.isEmpty == false,
              url.fragment == nil else {
            throw ConfigurationError("oauth_client_id must be the https URL where the client metadata is published, not \(clientID)")
        }
        guard let redirectURI else {
            throw ConfigurationError("oauth_client_id needs oauth_redirect_uri (http://127.0.0.1/callback, or an https page of yours)")
        }
        if Self.loopbackRedirect(redirectURI) != nil {
            guard authentication == .none else {
                throw ConfigurationError("""
                    a confidential client (oauth_client_auth = "private_key_jwt") must redirect to an https page: \
                    servers refuse private_key_jwt for native apps, whose redirects are loopback ones
                    """)
            }
        } else {
            guard let parts = URLComponents(string: redirectURI), parts.scheme == "https", parts.host?.isEmpty == false,
                  parts.fragment == nil else {
                throw ConfigurationError("oauth_redirect_uri must be http://127.0.0.1[:port]/path, http://[::1][:port]/path or an https URL, not \(redirectURI)")
            }
        }
    }

    /// The host, port (nil: any free one) and path of a loopback redirect URI; nil for others.
    static func loopbackRedirect(_ uri: String) -> (host: String, port: Int?, path: String)? {
        guard let parts = URLComponents(string: uri), parts.scheme == "http", parts.query == nil, parts.fragment == nil,
              let host = parts.host, host == "127.0.0.1" || host == "::1" || host == "[::1]" else { return nil }
        return (host == "127.0.0.1" ? host : "::1", parts.port, parts.path.isEmpty ? "/" : parts.path)
    }
}
