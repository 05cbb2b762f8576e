import Foundation
import OAuth2Client
import TOMLKit

/// One `[[provider]]` of the configuration: an OAuth 2.0 server named for logins, with what its
/// metadata does not say (or what it has none of).
///
/// ```toml
/// [[provider]]
/// name = "neodb"
/// issuer = "https://neodb.social"
/// authorization_endpoint = "https://neodb.social/oauth/authorize"
/// token_endpoint = "https://neodb.social/oauth/token"
/// app_registration_endpoint = "https://neodb.social/api/v1/apps"
/// scope = "read write"
/// profile_url = "https://neodb.social/api/me"
/// ```
///
/// With `authorization_endpoint` and `token_endpoint` the server's metadata is not fetched at
/// all; without them it is (RFC 8414, then OpenID discovery). Without `client_id` blueskyd
/// registers itself (RFC 7591, or Mastodon's `POST /api/v1/apps`).
public struct ProviderSettings: Sendable, Hashable {
    /// What `bskyctl login <name>` names.
    public var name: String
    public var issuer: String
    public var authorizationEndpoint: String?
    public var tokenEndpoint: String?
    public var revocationEndpoint: String?
    /// Where a server without metadata registers clients: Mastodon's `POST /api/v1/apps`
    /// (NeoDB's too), or RFC 7591's endpoint.
    public var appRegistrationEndpoint: String?
    public var registrationEndpoint: String?
    /// The origin calls go to (`/http/<account>/…`); the issuer's origin when unset.
    public var apiURL: String?
    public var profileURL: String?
    /// Profile field mapping: role (`subject`, `handle`, `displayName`, `avatar`, `description`) → key.
    public var profileFields: [String: String]?
    public var scope: String?
    public var clientID: String?
    /// Only with `client_id`, for a confidential client registered by hand.
    public var clientSecret: String?
    /// Only with `client_id`: the loopback redirect URI the client was registered with
    /// (`http://127.0.0.1:<port>/<path>`), listened on for its logins. Without it the listener
    /// takes any free port, which a server following RFC 8252 §7.3 accepts.
    public var redirectURI: String?

    public init(name: String, issuer: String) {
        self.name = name
        self.issuer = issuer
    }

    static let keys: [String] = ["name", "issuer", "authorization_endpoint", "token_endpoint", "revocation_endpoint",
                                 "app_registration_endpoint", "registration_endpoint", "api_url",
                                 "profile_url", "profile_fields", "scope", "client_id", "client_secret", "redirect_uri"]

    /// Metadata written out in full, when both required endpoints are configured.
    func configuredMetadata(allowInsecureLoopback: Bool) throws(OAuth2ClientError) -> ProviderMetadata? {
        guard let authorizationEndpoint, let tokenEndpoint else { return nil }
        func checked(_ url: String?) throws(OAuth2ClientError) -> URL? {
            try url.map { url throws(OAuth2ClientError) in try ProviderMetadata.checkedURL(url, allowInsecureLoopback: allowInsecureLoopback) }
        }
        return ProviderMetadata(
            issuer: issuer,
            authorizationEndpoint: try ProviderMetadata.checkedURL(authorizationEndpoint, allowInsecureLoopback: allowInsecureLoopback),
            tokenEndpoint: try ProviderMetadata.checkedURL(tokenEndpoint, allowInsecureLoopback: allowInsecureLoopback),
            revocationEndpoint: try checked(revocationEndpoint),
            registrationEndpoint: try checked(registrationEndpoint),
            appRegistrationEndpoint: try checked(appRegistrationEndpoint))
    }

    /// The port and path of a loopback redirect URI, nil when it is not one.
    static func loopbackRedirect(_ uri: String) -> (port: Int, path: String)? {
        guard let url = URL(string: uri), url.scheme == "http", url.host == "127.0.0.1", let port = url.port, port > 0,
              url.query == nil, url.fragment == nil else { return nil }
        return (port, url.path.isEmpty ? "/" : url.path)
    }

    /// Whether `identifier` names this provider: its name, or its issuer (a trailing slash aside).
    func matches(_ identifier: String) -> Bool {
        identifier == name || ProviderSettings.trimmed(identifier) == ProviderSettings.trimmed(issuer)
    }

    static func trimmed(_ url: String) -> String {
        (url.hasSuffix("/") ? String(url.dropLast()) : url).lowercased()
    }
}

extension DaemonConfiguration {
    /// Reads the `[[provider]]` array of tables; every mistake names the provider and the key.
    static func parseProviders(_ value: TOMLValueConvertible, reader: ConfigurationFileReader, file: String?,
                               allowInsecureLoopback: Bool) throws(ConfigurationError) -> [ProviderSettings] {
        let tables = NamedTables(kind: "provider", reader: reader, file: file)
        var providers: [ProviderSettings] = []
        for entry in try tables.entries(value, keys: ProviderSettings.keys) {
            let (name, table) = (entry.name, entry.table)
            func string(_ key: String) throws(ConfigurationError) -> String? { try entry.string(key) }
            func fail(_ what: String) -> ConfigurationError { tables.fail(what) }
            func url(_ key: String) throws(ConfigurationError) -> String? {
                guard let text = try string(key) else { return nil }
                do {
                    _ = try ProviderMetadata.checkedURL(text, allowInsecureLoopback: allowInsecureLoopback)
                } catch {
                    throw fail("provider '\(name)': \(key) \(text) is not an https URL")
                }
                return text
            }
            guard let issuer = try url("issuer") else { throw fail("provider '\(name)' needs an issuer (the server's https URL)") }
            var provider = ProviderSettings(name: name, issuer: issuer)
            provider.authorizationEndpoint = try url("authorization_endpoint")
            provider.tokenEndpoint = try url("token_endpoint")
            provider.revocationEndpoint = try url("revocation_endpoint")
            provider.appRegistrationEndpoint = try url("app_registration_endpoint")
            provider.registrationEndpoint = try url("registration_endpoint")
            provider.apiURL = try url("api_url")
            provider.profileURL = try url("profile_url")
            provider.scope = try string("scope")
            provider.clientID = try string("client_id")
            provider.clientSecret = try string("client_secret")
            guard (provider.authorizationEndpoint == nil) == (provider.tokenEndpoint == nil) else {
                throw fail("provider '\(name)': give both authorization_endpoint and token_endpoint, or neither (discovery)")
            }
            if provider.authorizationEndpoint == nil,
               provider.revocationEndpoint != nil || provider.appRegistrationEndpoint != nil || provider.registrationEndpoint != nil {
                throw fail("provider '\(name)': revocation and registration endpoints go with authorization_endpoint and token_endpoint (else they come from the metadata)")
            }
            if provider.clientSecret != nil, provider.clientID == nil {
                throw fail("provider '\(name)': client_secret needs the client_id it belongs to")
            }
            if let redirect = try string("redirect_uri") {
                guard provider.clientID != nil else { throw fail("provider '\(name)': redirect_uri needs the client_id registered with it") }
                guard ProviderSettings.loopbackRedirect(redirect) != nil else {
                    throw fail("provider '\(name)': redirect_uri must be http://127.0.0.1:<port>/<path> (blueskyd listens there)")
                }
                provider.redirectURI = redirect
            }
            if let value = table["profile_fields"] {
                guard let fields = value.table else { throw fail("provider '\(name)': profile_fields must be a table of role = \"key\"") }
                var mapping: [String: String] = [:]
                for (role, key) in fields {
                    guard OAuth2ProfileFields.roles.contains(role) else {
                        throw fail("provider '\(name)': profile_fields has unknown role '\(role)' (known: \(OAuth2ProfileFields.roles.sorted().joined(separator: ", ")))")
                    }
                    guard let text = key.string, !text.isEmpty else { throw fail("provider '\(name)': profile_fields.\(role) must be a non-empty string") }
                    mapping[role] = text
                }
                guard mapping["subject"] != nil else { throw fail("provider '\(name)': profile_fields needs a subject (the key that never changes)") }
                guard provider.profileURL != nil else { throw fail("provider '\(name)': profile_fields needs the profile_url it reads") }
                provider.profileFields = mapping
            }
            guard !providers.contains(where: { $0.matches(issuer) }) else { throw fail("two providers have the issuer \(issuer)") }
            providers.append(provider)
        }
        return providers
    }
}
