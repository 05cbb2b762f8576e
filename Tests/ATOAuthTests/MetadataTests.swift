import ATOAuth
import BlueskyHTTP
import Foundation
import JSONRPC
import Testing

@Suite("OAuth discovery metadata")
struct MetadataTests {
    static let pds = "https://pds.example.com"
    static let issuer = "https://auth.example.com"
    static let resourceURL = "https://pds.example.com/.well-known/oauth-protected-resource"
    static let serverURL = "https://auth.example.com/.well-known/oauth-authorization-server"

    static func response(_ json: JSONValue, status: Int = 200) -> InboundResponse {
        InboundResponse(status: status, headers: [("Content-Type", "application/json")], body: json.encoded())
    }

    static let goodServer: [String: JSONValue] = [
        "issuer": .string(issuer),
        "authorization_endpoint": "https://auth.example.com/oauth/authorize",
        "token_endpoint": "https://auth.example.com/oauth/token",
        "pushed_authorization_request_endpoint": "https://auth.example.com/oauth/par",
        "revocation_endpoint": "https://auth.example.com/oauth/revoke",
        "require_pushed_authorization_requests": true,
        "authorization_response_iss_parameter_supported": true,
        "client_id_metadata_document_supported": true,
        "dpop_signing_alg_values_supported": ["RS256", "ES256"],
        "scopes_supported": ["atproto", "transition:generic"],
        "protected_resources": [.string(pds)],
    ]

    func server(_ changes: [String: JSONValue?]) throws(OAuthMetadataError) -> AuthorizationServerMetadata {
        var object = Self.goodServer
        for (name, value) in changes { object[name] = value }
        return try AuthorizationServerMetadata(response: Self.response(.object(object)), url: Self.serverURL)
    }

    // MARK: protected resource

    @Test("a good protected-resource document gives its one authorization server")
    func resourceAccepted() throws {
        let json: JSONValue = ["resource": .string(Self.pds), "authorization_servers": [.string(Self.issuer)]]
        let metadata = try ProtectedResourceMetadata(response: Self.response(json), url: Self.resourceURL)
        #expect(try metadata.validatedIssuer(pdsOrigin: Self.pds) == Self.issuer)
    }

    @Test("protected-resource rules, each failing in turn")
    func resourceRules() {
        func check(_ resource: String?, _ servers: [String], _ expected: OAuthMetadataError, policy: OAuthURLPolicy = .init()) {
            let metadata = ProtectedResourceMetadata(resource: resource, authorizationServers: servers)
            #expect(throws: expected) { try metadata.validatedIssuer(pdsOrigin: Self.pds, policy: policy) }
        }
        check("https://other.example.com", [Self.issuer], .resourceMismatch(expected: Self.pds, actual: "https://other.example.com"))
        check("https://pds.example.com/", [Self.issuer], .resourceMismatch(expected: Self.pds, actual: "https://pds.example.com/"))
        check(nil, [Self.issuer], .resourceMismatch(expected: Self.pds, actual: nil))
        check(Self.pds, [], .authorizationServerCount(0))
        check(Self.pds, [Self.issuer, "https://auth2.example.com"], .authorizationServerCount(2))
        check(Self.pds, ["http://auth.example.com"], .insecureURL(.authorizationServer, "http://auth.example.com"))
        check(Self.pds, ["https://auth.example.com/"], .notAnOrigin(.authorizationServer, "https://auth.example.com/"))
        check(Self.pds, ["https://auth.example.com/oauth"], .notAnOrigin(.authorizationServer, "https://auth.example.com/oauth"))
        check(Self.pds, ["not a url"], .invalidURL(.authorizationServer, "not a url"))
        // Loopback over plain http: refused by default, accepted in development mode only.
        check(Self.pds, ["http://127.0.0.1:2583"], .insecureURL(.authorizationServer, "http://127.0.0.1:2583"))
        check(Self.pds, ["http://auth.example.com"], .insecureURL(.authorizationServer, "http://auth.example.com"),
              policy: .init(allowInsecureLoopback: true))
        let local = ProtectedResourceMetadata(resource: Self.pds, authorizationServers: ["http://127.0.0.1:2583"])
        #expect(throws: Never.self) {
            try local.validatedIssuer(pdsOrigin: Self.pds, policy: .init(allowInsecureLoopback: true))
        }
    }

    @Test("the document must be HTTP 200 JSON with the right member types")
    func resourceDocument() {
        let url = Self.resourceURL
        #expect(throws: OAuthMetadataError.unexpectedStatus(url: url, status: 404)) {
            try ProtectedResourceMetadata(response: Self.response(["error": "x"], status: 404), url: url)
        }
        #expect(throws: OAuthMetadataError.notJSON(url: url)) {
            try ProtectedResourceMetadata(response: InboundResponse(status: 200, headers: [], body: Array("<html>".utf8)), url: url)
        }
        #expect(throws: OAuthMetadataError.malformed(url: url, reason: "authorization_servers is not an array")) {
            try ProtectedResourceMetadata(response: Self.response(["resource": "x", "authorization_servers": "y"]), url: url)
        }
    }

    // MARK: authorization server

    @Test("a good authorization server document gives its endpoints")
    func serverAccepted() throws {
        let endpoints = try server([:]).validated(expectedIssuer: Self.issuer, pdsOrigin: Self.pds)
        #expect(endpoints.issuer == Self.issuer)
        #expect(endpoints.pushedAuthorizationRequest.absoluteString == "https://auth.example.com/oauth/par")
        #expect(endpoints.authorization.absoluteString == "https://auth.example.com/oauth/authorize")
        #expect(endpoints.token.absoluteString == "https://auth.example.com/oauth/token")
        #expect(endpoints.revocation?.absoluteString == "https://auth.example.com/oauth/revoke")
        // protected_resources is optional.
        #expect(throws: Never.self) {
            try server(["protected_resources": .some(nil)]).validated(expectedIssuer: Self.issuer, pdsOrigin: Self.pds)
        }
    }

    @Test("authorization server rules, each failing in turn", arguments: [
        (["issuer": "https://evil.example.com"], OAuthMetadataError.issuerMismatch(expected: MetadataTests.issuer, actual: "https://evil.example.com")),
        (["issuer": "https://auth.example.com/"], .issuerMismatch(expected: MetadataTests.issuer, actual: "https://auth.example.com/")),
        (["issuer": nil], .issuerMismatch(expected: MetadataTests.issuer, actual: nil)),
        (["require_pushed_authorization_requests": false], .pushedAuthorizationNotRequired),
        (["require_pushed_authorization_requests": nil], .pushedAuthorizationNotRequired),
        (["pushed_authorization_request_endpoint": nil], .missingEndpoint(.pushedAuthorizationRequestEndpoint)),
        (["authorization_response_iss_parameter_supported": false], .issParameterNotSupported),
        (["client_id_metadata_document_supported": nil], .clientIDMetadataDocumentNotSupported),
        (["dpop_signing_alg_values_supported": ["RS256"]], .dpopES256NotSupported(["RS256"])),
        (["dpop_signing_alg_values_supported": nil], .dpopES256NotSupported([])),
        (["protected_resources": ["https://other.example.com"]],
         .resourceNotListed(pds: MetadataTests.pds, listed: ["https://other.example.com"])),
        (["authorization_endpoint": nil], .missingEndpoint(.authorizationEndpoint)),
        (["token_endpoint": "http://auth.example.com/oauth/token"],
         .insecureURL(.tokenEndpoint, "http://auth.example.com/oauth/token")),
        (["revocation_endpoint": "ftp://auth.example.com/revoke"], .invalidURL(.revocationEndpoint, "ftp://auth.example.com/revoke")),
    ] as [([String: JSONValue?], OAuthMetadataError)])
    func serverRules(changes: [String: JSONValue?], expected: OAuthMetadataError) throws {
        let metadata = try server(changes)
        #expect(throws: expected) { try metadata.validated(expectedIssuer: Self.issuer, pdsOrigin: Self.pds) }
    }

    @Test("the issuer itself must be an https origin; loopback http only in development mode")
    func issuerForm() throws {
        let local = "http://127.0.0.1:2583"
        let metadata = try server(["issuer": .string(local), "pushed_authorization_request_endpoint": "http://127.0.0.1:2583/oauth/par",
                                   "authorization_endpoint": "http://127.0.0.1:2583/oauth/authorize",
                                   "token_endpoint": "http://127.0.0.1:2583/oauth/token", "revocation_endpoint": nil,
                                   "protected_resources": nil])
        #expect(throws: OAuthMetadataError.insecureURL(.issuer, local)) {
            try metadata.validated(expectedIssuer: local, pdsOrigin: Self.pds)
        }
        let endpoints = try metadata.validated(expectedIssuer: local, pdsOrigin: Self.pds, policy: .init(allowInsecureLoopback: true))
        #expect(endpoints.revocation == nil)
    }

    @Test("a flag of the wrong type is malformed, not false")
    func wrongType() {
        #expect(throws: OAuthMetadataError.malformed(url: Self.serverURL, reason: "require_pushed_authorization_requests is not a boolean")) {
            try server(["require_pushed_authorization_requests": "true"])
        }
    }

    @Test("every failure reads as one line")
    func oneLine() {
        let errors: [OAuthMetadataError] = [.authorizationServerCount(2), .pushedAuthorizationNotRequired,
                                            .notAnOrigin(.issuer, "https://a/"), .dpopES256NotSupported([])]
        for error in errors { #expect(!error.description.contains("\n") && !error.description.isEmpty) }
    }

    @Test("the well-known URLs and the origin of a PDS URL")
    func urls() {
        #expect(ProtectedResourceMetadata.url(pdsOrigin: Self.pds)?.absoluteString == Self.resourceURL)
        #expect(AuthorizationServerMetadata.url(issuer: Self.issuer)?.absoluteString == Self.serverURL)
        #expect(OAuthURLPolicy.origin(of: URL(string: "https://PDS.example.com:443/xrpc/x?y")!) == "https://pds.example.com")
        #expect(OAuthURLPolicy.origin(of: URL(string: "http://127.0.0.1:2583/")!) == "http://127.0.0.1:2583")
    }
}
