import Foundation

/// The client metadata document a hosted client publishes at its `client_id` URL (atproto
/// "client ID metadata document", OAuth dynamic registration field names).
public struct ClientMetadataDocument: Codable, Sendable, Equatable {
    public var clientID: String
    /// `web` (default) or `native`.
    public var applicationType: String
    public var clientName: String?
    public var clientURI: String?
    public var grantTypes: [String]
    public var responseTypes: [String]
    public var scope: String
    public var redirectURIs: [String]
    /// Always true in atproto: every access token is DPoP-bound.
    public var dpopBoundAccessTokens: Bool
    /// `none` (public) or `private_key_jwt` (confidential).
    public var tokenEndpointAuthMethod: String
    /// `ES256` for confidential clients.
    public var tokenEndpointAuthSigningAlg: String?
    public var jwks: JWKSet?
    public var jwksURI: String?

    enum CodingKeys: String, CodingKey {
        case clientID = "client_id"
        case applicationType = "application_type"
        case clientName = "client_name"
        case clientURI = "client_uri"
        case grantTypes = "grant_types"
        case responseTypes = "response_types"
        case scope
        case redirectURIs = "redirect_uris"
        case dpopBoundAccessTokens = "dpop_bound_access_tokens"
        case tokenEndpointAuthMethod = "token_endpoint_auth_method"
        case tokenEndpointAuthSigningAlg = "token_endpoint_auth_signing_alg"
        case jwks
        case jwksURI = "jwks_uri"
    }

    /// A public hosted client (`token_endpoint_auth_method: none`).
    public static func publicClient(clientID: String, redirectURIs: [String], scope: String,
                                    applicationType: String = "web", clientName: String? = nil,
                                    clientURI: String? = nil) throws(ClientIdentityError) -> ClientMetadataDocument {
        let document = ClientMetadataDocument(
            clientID: clientID, applicationType: applicationType, clientName: clientName, clientURI: clientURI,
            grantTypes: ["authorization_code", "refresh_token"], responseTypes: ["code"], scope: scope,
            redirectURIs: redirectURIs, dpopBoundAccessTokens: true, tokenEndpointAuthMethod: "none",
            tokenEndpointAuthSigningAlg: nil, jwks: nil, jwksURI: nil)
        try document.validate()
        return document
    }

    /// A confidential web client authenticating with `private_key_jwt`; its public keys are
    /// published inline (`jwks`) unless `jwksURI` is given.
    public static func confidentialClient(clientID: String, redirectURIs: [String], scope: String,
                                          keys: [ClientSigningKey], jwksURI: String? = nil,
                                          clientName: String? = nil, clientURI: String? = nil)
        throws(ClientIdentityError) -> ClientMetadataDocument
    {
        guard !keys.isEmpty else { throw .confidentialWithoutKeys }
        var seen = Set<String>()
        for key in keys where !seen.insert(key.keyID).inserted { throw .duplicateKeyID(key.keyID) }
        let document = ClientMetadataDocument(
            clientID: clientID, applicationType: "web", clientName: clientName, clientURI: clientURI,
            grantTypes: ["authorization_code", "refresh_token"], responseTypes: ["code"], scope: scope,
            redirectURIs: redirectURIs, dpopBoundAccessTokens: true, tokenEndpointAuthMethod: "private_key_jwt",
            tokenEndpointAuthSigningAlg: "ES256", jwks: jwksURI == nil ? JWKSet(keys: keys.map(\.jwk)) : nil,
            jwksURI: jwksURI)
        try document.validate()
        return document
    }

    /// Checks the rules a server applies to a fetched document: https `client_id`, at least
    /// one absolute redirect URI, `atproto` in the scope. (The grant and response types,
    /// `dpop_bound_access_tokens` and the auth method are fixed by the constructors.)
    public func validate() throws(ClientIdentityError) {
        guard let url = URLComponents(string: clientID), url.scheme == "https", url.host?.isEmpty == false else {
            throw .clientIDNotHTTPS(clientID)
        }
        guard !redirectURIs.isEmpty else { throw .noRedirectURI }
        for uri in redirectURIs {
            guard let parsed = URLComponents(string: uri), parsed.scheme != nil, parsed.fragment == nil else {
                throw .invalidRedirectURI(uri)
            }
        }
        guard OAuthScope.contains(scope, "atproto") else { throw .scopeLacksAtproto(scope) }
    }

    /// The document as served: JSON with sorted keys, slashes unescaped.
    public func encodedJSON() throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(self))
    }
}
