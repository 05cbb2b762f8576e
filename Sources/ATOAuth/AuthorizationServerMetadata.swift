import BlueskyHTTP
import Foundation

/// An authorization server's `/.well-known/oauth-authorization-server` document (RFC 8414),
/// the members the atproto profile relies on.
public struct AuthorizationServerMetadata: Sendable, Equatable {
    public var issuer: String?
    public var authorizationEndpoint: String?
    public var tokenEndpoint: String?
    public var pushedAuthorizationRequestEndpoint: String?
    public var revocationEndpoint: String?
    public var requirePushedAuthorizationRequests: Bool
    public var authorizationResponseISSParameterSupported: Bool
    public var clientIDMetadataDocumentSupported: Bool
    public var dpopSigningAlgValuesSupported: [String]
    public var scopesSupported: [String]?
    /// The resources this server issues tokens for; when present it must list the PDS.
    public var protectedResources: [String]?

    public init(issuer: String?, authorizationEndpoint: String?, tokenEndpoint: String?,
                pushedAuthorizationRequestEndpoint: String?, revocationEndpoint: String? = nil,
                requirePushedAuthorizationRequests: Bool, authorizationResponseISSParameterSupported: Bool,
                clientIDMetadataDocumentSupported: Bool, dpopSigningAlgValuesSupported: [String],
                scopesSupported: [String]? = nil, protectedResources: [String]? = nil) {
        self.issuer = issuer
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.pushedAuthorizationRequestEndpoint = pushedAuthorizationRequestEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.requirePushedAuthorizationRequests = requirePushedAuthorizationRequests
        self.authorizationResponseISSParameterSupported = authorizationResponseISSParameterSupported
        self.clientIDMetadataDocumentSupported = clientIDMetadataDocumentSupported
        self.dpopSigningAlgValuesSupported = dpopSigningAlgValuesSupported
        self.scopesSupported = scopesSupported
        self.protectedResources = protectedResources
    }

    /// Where to fetch it for `issuer`.
    public static func url(issuer: String) -> URL? {
        URL(string: issuer + "/.well-known/oauth-authorization-server")
    }

    /// Reads the document from a response: HTTP 200 with a JSON object. A flag that is absent
    /// reads as false, as RFC 8414 defines.
    public init(response: InboundResponse, url: String) throws(OAuthMetadataError) {
        let fields = MetadataJSON.Reader(object: try MetadataJSON.object(response: response, url: url), url: url)
        issuer = try fields.string("issuer")
        authorizationEndpoint = try fields.string("authorization_endpoint")
        tokenEndpoint = try fields.string("token_endpoint")
        pushedAuthorizationRequestEndpoint = try fields.string("pushed_authorization_request_endpoint")
        revocationEndpoint = try fields.string("revocation_endpoint")
        requirePushedAuthorizationRequests = try fields.bool("require_pushed_authorization_requests") ?? false
        authorizationResponseISSParameterSupported = try fields.bool("authorization_response_iss_parameter_supported") ?? false
        clientIDMetadataDocumentSupported = try fields.bool("client_id_metadata_document_supported") ?? false
        dpopSigningAlgValuesSupported = try fields.strings("dpop_signing_alg_values_supported") ?? []
        scopesSupported = try fields.strings("scopes_supported")
        protectedResources = try fields.strings("protected_resources")
    }

    /// Checks the document against where it was fetched from and the PDS it serves; returns the
    /// endpoints to use. Each rule of the atproto profile, in this order:
    ///
    /// 1. `issuer` equals `expectedIssuer` (the origin it was fetched from) and is an https
    ///    origin without path (http to loopback only when `policy` allows it);
    /// 2. `require_pushed_authorization_requests` is true, and there is a PAR endpoint;
    /// 3. `authorization_response_iss_parameter_supported` is true;
    /// 4. `client_id_metadata_document_supported` is true;
    /// 5. `dpop_signing_alg_values_supported` contains ES256;
    /// 6. `protected_resources`, when present, lists `pdsOrigin`;
    /// 7. the authorization and token endpoints exist and are allowed URLs.
    public func validated(expectedIssuer: String, pdsOrigin: String?, policy: OAuthURLPolicy = .init())
        throws(OAuthMetadataError) -> AuthorizationServerEndpoints
    {
        try policy.checkOrigin(expectedIssuer, role: .issuer)
        guard issuer == expectedIssuer else { throw .issuerMismatch(expected: expectedIssuer, actual: issuer) }
        guard requirePushedAuthorizationRequests else { throw .pushedAuthorizationNotRequired }
        let par = try policy.checkEndpoint(pushedAuthorizationRequestEndpoint, role: .pushedAuthorizationRequestEndpoint)
        guard authorizationResponseISSParameterSupported else { throw .issParameterNotSupported }
        guard clientIDMetadataDocumentSupported else { throw .clientIDMetadataDocumentNotSupported }
        guard dpopSigningAlgValuesSupported.contains("ES256") else {
            throw .dpopES256NotSupported(dpopSigningAlgValuesSupported)
        }
        if let protectedResources, let pdsOrigin, !protectedResources.contains(pdsOrigin) {
            throw .resourceNotListed(pds: pdsOrigin, listed: protectedResources)
        }
        let authorization = try policy.checkEndpoint(authorizationEndpoint, role: .authorizationEndpoint)
        let token = try policy.checkEndpoint(tokenEndpoint, role: .tokenEndpoint)
        let revocation = try revocationEndpoint.map { text throws(OAuthMetadataError) in
            try policy.checkEndpoint(text, role: .revocationEndpoint)
        }
        return AuthorizationServerEndpoints(issuer: expectedIssuer, authorization: authorization, token: token,
                                            pushedAuthorizationRequest: par, revocation: revocation)
    }
}

/// The endpoints of a validated authorization server.
public struct AuthorizationServerEndpoints: Sendable, Equatable {
    /// The issuer identifier: the `iss` the callback must carry and the `aud` of client assertions.
    public var issuer: String
    public var authorization: URL
    public var token: URL
    public var pushedAuthorizationRequest: URL
    /// Optional in the metadata; logout then cannot revoke on the server.
    public var revocation: URL?

    public init(issuer: String, authorization: URL, token: URL, pushedAuthorizationRequest: URL, revocation: URL?) {
        self.issuer = issuer
        self.authorization = authorization
        self.token = token
        self.pushedAuthorizationRequest = pushedAuthorizationRequest
        self.revocation = revocation
    }
}
