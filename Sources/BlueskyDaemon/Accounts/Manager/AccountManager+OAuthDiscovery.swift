import ATIdentity
import ATOAuth
import ATSyntax
import BlueskyHTTP
import Foundation

/// Finding the authorization server of a login, and checking afterwards that it is the one the
/// account's PDS trusts.
extension AccountManager {
    struct OAuthDiscovery: Sendable {
        var endpoints: AuthorizationServerEndpoints
        /// Known when the login started from a handle or a DID.
        var did: String?
        var loginHint: String?
    }

    /// Handle or DID → PDS → protected resource → issuer → metadata. A URL is a PDS when it
    /// serves protected-resource metadata, otherwise an entryway (an authorization server).
    func discover(_ identifier: String) async throws(DaemonError) -> OAuthDiscovery {
        let lowered = identifier.lowercased()
        if lowered.hasPrefix("https://") || lowered.hasPrefix("http://") {
            guard let url = URL(string: identifier), let origin = OAuthURLPolicy.origin(of: url) else {
                throw .oauthLogin(.invalidIdentifier(identifier))
            }
            if let issuer = try await protectedResourceIssuer(pdsOrigin: origin, required: false) {
                return OAuthDiscovery(endpoints: try await authorizationServer(issuer, pdsOrigin: origin))
            }
            return OAuthDiscovery(endpoints: try await authorizationServer(origin, pdsOrigin: nil))
        }
        guard let parsed = try? ATIdentifier(parsing: identifier) else { throw .oauthLogin(.invalidIdentifier(identifier)) }
        let resolved = try await resolveForOAuth(parsed)
        guard let pdsOrigin = OAuthURLPolicy.origin(of: resolved.pds) else {
            throw .oauthLogin(.metadataInvalid("the PDS URL \(resolved.pds) is not an http(s) URL"))
        }
        let issuer = try await protectedResourceIssuer(pdsOrigin: pdsOrigin, required: true)!
        return OAuthDiscovery(endpoints: try await authorizationServer(issuer, pdsOrigin: pdsOrigin),
                              did: resolved.did.description, loginHint: identifier)
    }

    func resolveForOAuth(_ identifier: ATIdentifier) async throws(DaemonError) -> ResolvedIdentity {
        do {
            return try await identity.resolve(identifier)
        } catch {
            throw .identityResolutionFailed(error.description)
        }
    }

    /// The issuer a PDS names; nil when `required` is false and the URL serves no such document.
    func protectedResourceIssuer(pdsOrigin: String, required: Bool) async throws(DaemonError) -> String? {
        guard let url = ProtectedResourceMetadata.url(pdsOrigin: pdsOrigin) else {
            throw .oauthLogin(.metadataInvalid("\(pdsOrigin) is not a valid origin"))
        }
        try checkPolicy(pdsOrigin)
        let response = try await fetchMetadata(url)
        if !required, response.status == 404 || !response.isJSON { return nil }
        do {
            return try ProtectedResourceMetadata(response: response, url: url.absoluteString)
                .validatedIssuer(pdsOrigin: pdsOrigin, policy: environment.oauth.policy)
        } catch {
            throw .oauthLogin(.metadataInvalid(error.description))
        }
    }

    /// The issuer's metadata, validated by the atproto profile's rules.
    func authorizationServer(_ issuer: String, pdsOrigin: String?) async throws(DaemonError) -> AuthorizationServerEndpoints {
        guard let url = AuthorizationServerMetadata.url(issuer: issuer) else {
            throw .oauthLogin(.metadataInvalid("\(issuer) is not a valid issuer"))
        }
        try checkPolicy(issuer)
        let response = try await fetchMetadata(url)
        do {
            return try AuthorizationServerMetadata(response: response, url: url.absoluteString)
                .validated(expectedIssuer: issuer, pdsOrigin: pdsOrigin, policy: environment.oauth.policy)
        } catch {
            throw .oauthLogin(.metadataInvalid(error.description))
        }
    }

    /// https only, plain http to loopback only when the configuration allows it; checked before
    /// anything is sent, so a refused server is never contacted.
    private func checkPolicy(_ origin: String) throws(DaemonError) {
        guard let url = URL(string: origin), let scheme = url.scheme?.lowercased() else {
            throw .oauthLogin(.metadataInvalid("\(origin) is not a URL"))
        }
        if scheme == "https" { return }
        if scheme == "http", environment.oauth.policy.allowInsecureLoopback, HTTPPolicy.isLoopback(host: url.host ?? "") { return }
        throw .oauthLogin(.metadataInvalid("\(origin) is not https"))
    }

    private func fetchMetadata(_ url: URL) async throws(DaemonError) -> InboundResponse {
        let response: InboundResponse
        do {
            response = try await environment.oauth.http.send(OutboundRequest(url: url, headers: [("Accept", "application/json")]),
                                                             timeout: environment.oauth.timeout)
        } catch {
            throw .upstreamUnavailable(error.description)
        }
        // A server that is down or rate limiting says nothing about its metadata: try again later.
        if response.status >= 500 || response.status == 429 {
            throw .upstreamUnavailable("\(url.absoluteString) answered HTTP \(response.status)")
        }
        return response
    }

    /// The issuer binding: the tokens' `sub` → DID document → PDS → its authorization server must
    /// be the issuer that granted them (else a server could hand out tokens for any account).
    func checkIssuerBinding(did: String, issuer: String) async throws(DaemonError) -> ResolvedIdentity {
        guard let parsed = try? ATIdentifier(parsing: did) else {
            throw .oauthLogin(.tokenResponseInvalid("sub \(did) is not a DID"))
        }
        let resolved = try await resolveForOAuth(parsed)
        guard let pdsOrigin = OAuthURLPolicy.origin(of: resolved.pds) else {
            throw .oauthLogin(.metadataInvalid("the PDS URL \(resolved.pds) is not an http(s) URL"))
        }
        let expected = try await protectedResourceIssuer(pdsOrigin: pdsOrigin, required: true)!
        guard expected == issuer else { throw .oauthLogin(.issuerNotAuthoritative(issuer: issuer, expected: expected)) }
        return resolved
    }
}
