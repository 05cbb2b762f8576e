/// Why discovery refused a server's metadata: each rule of the atproto OAuth profile its own
/// case, with one line saying which.
public enum OAuthMetadataError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Which URL a failure is about.
    public enum Role: String, Sendable, Equatable {
        case resource = "resource"
        case issuer = "issuer"
        case authorizationServer = "authorization server"
        case authorizationEndpoint = "authorization_endpoint"
        case tokenEndpoint = "token_endpoint"
        case pushedAuthorizationRequestEndpoint = "pushed_authorization_request_endpoint"
        case revocationEndpoint = "revocation_endpoint"
    }

    /// The metadata document could not be fetched as JSON.
    case unexpectedStatus(url: String, status: Int)
    case notJSON(url: String)
    /// JSON, but not an object of the expected shape.
    case malformed(url: String, reason: String)
    case resourceMismatch(expected: String, actual: String?)
    case authorizationServerCount(Int)
    case invalidURL(Role, String)
    case insecureURL(Role, String)
    case notAnOrigin(Role, String)
    case issuerMismatch(expected: String, actual: String?)
    case pushedAuthorizationNotRequired
    case missingEndpoint(Role)
    case issParameterNotSupported
    case clientIDMetadataDocumentNotSupported
    case dpopES256NotSupported([String])
    case resourceNotListed(pds: String, listed: [String])

    public var description: String {
        switch self {
        case .unexpectedStatus(let url, let status): "\(url) answered HTTP \(status), not the metadata document"
        case .notJSON(let url): "\(url) did not answer with JSON"
        case .malformed(let url, let reason): "the metadata at \(url) is malformed: \(reason)"
        case .resourceMismatch(let expected, let actual):
            "the PDS's protected-resource metadata names resource \(actual.map { "\"\($0)\"" } ?? "(none)"), not its origin \(expected)"
        case .authorizationServerCount(let count):
            "the PDS must name exactly one authorization server, not \(count)"
        case .invalidURL(let role, let url): "the \(role.rawValue) \"\(url)\" is not an absolute http(s) URL"
        case .insecureURL(let role, let url):
            "the \(role.rawValue) \(url) is not https (plain http is only allowed to loopback in development mode)"
        case .notAnOrigin(let role, let url):
            "the \(role.rawValue) \(url) must be an origin alone: no path, trailing slash, query, fragment or user"
        case .issuerMismatch(let expected, let actual):
            "the authorization server metadata says issuer \(actual.map { "\"\($0)\"" } ?? "(none)"), but it was fetched from \(expected)"
        case .pushedAuthorizationNotRequired:
            "the authorization server does not set require_pushed_authorization_requests to true"
        case .missingEndpoint(let role): "the authorization server metadata has no \(role.rawValue)"
        case .issParameterNotSupported:
            "the authorization server does not set authorization_response_iss_parameter_supported to true"
        case .clientIDMetadataDocumentNotSupported:
            "the authorization server does not set client_id_metadata_document_supported to true"
        case .dpopES256NotSupported(let algorithms):
            "the authorization server's dpop_signing_alg_values_supported \(algorithms) lacks ES256"
        case .resourceNotListed(let pds, let listed):
            "the authorization server's protected_resources \(listed) does not list the PDS \(pds)"
        }
    }
}
