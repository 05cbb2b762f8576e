import AccountStoreCore
import Foundation
import OAuth2Client

/// One login at another OAuth 2.0 server: the authorization request (PKCE, state, the
/// registered client and its redirect URI), and what the account will keep of the server.
struct OAuth2LoginPlan: Sendable {
    var request: AuthorizationCode
    /// The origin the account's calls go to (a provider's `api_url`, else the issuer's origin).
    var apiOrigin: String
    var profileURL: URL?
    var profileFields: [String: String]
    var provider: String?
    /// The scope the client was registered for, when blueskyd registered it.
    var registeredScope: String?

    var metadata: ProviderMetadata { request.metadata }

    /// What the account's sealed secrets keep besides its tokens.
    var facts: OAuth2SessionFacts {
        OAuth2SessionFacts(clientSecret: request.client.clientSecret, redirectURI: request.redirectURI,
                           profileURL: profileURL?.absoluteString, profileFields: profileFields, provider: provider,
                           registeredScope: registeredScope)
    }
}

/// How an account at another OAuth 2.0 server is named in the registry, where atproto accounts
/// have their DID: the issuer and the server's subject for the person, which never change (a
/// handle may). `https://social.example#109` is account 109 of that server's issuer.
enum OAuth2AccountKey {
    static func make(issuer: String, subject: String) -> String {
        (issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer) + "#" + subject
    }

    /// A handle people recognise: the server's username with its host (`alice@social.example`),
    /// as Mastodon writes remote accounts; an address that already has a host stays as it is.
    /// Whether `handle` is one of the account's own server: `name@<its API host>`. Only such a
    /// handle names the account; another (`bob@elsewhere`) could be claimed by any server, and
    /// take a name that belongs to an account elsewhere.
    static func isOwn(_ handle: String, apiOrigin: String) -> Bool {
        guard let host = URL(string: apiOrigin)?.host?.lowercased(), let at = handle.lastIndex(of: "@") else { return false }
        return handle[handle.index(after: at)...].lowercased() == host
    }

    static func handle(_ name: String?, apiOrigin: String) -> String? {
        guard let name = name?.trimmingCharacters(in: .whitespaces), !name.isEmpty else { return nil }
        let bare = name.hasPrefix("@") ? String(name.dropFirst()) : name
        if bare.contains("@") { return bare.lowercased() }
        guard let host = URL(string: apiOrigin)?.host else { return bare.lowercased() }
        return (bare + "@" + host).lowercased()
    }
}

/// What the token client of a stored OAuth 2.0 session needs: its endpoints and registered client.
extension OAuthSessionInfo {
    func oauth2Metadata() -> ProviderMetadata? {
        guard let token = URL(string: tokenEndpoint) else { return nil }
        // Refresh and revocation use the token and revocation endpoints; the authorization
        // endpoint is needed at login alone and is not stored.
        return ProviderMetadata(issuer: issuer, authorizationEndpoint: token, tokenEndpoint: token,
                                revocationEndpoint: revocationEndpoint.flatMap(URL.init(string:)))
    }
}
