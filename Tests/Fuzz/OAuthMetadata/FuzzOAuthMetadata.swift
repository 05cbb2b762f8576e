import BlueskyHTTP
import Foundation
import JSONRPC

/// libFuzzer entry point: one input is the body of a metadata response, read both as a PDS's
/// protected-resource metadata (RFC 9728) and as an authorization server's metadata (RFC 8414),
/// then validated under both URL policies (https only; http to loopback allowed).
///
/// Every document that reads must read the same after being written out again. Whatever the
/// validation accepts must be what the rest of discovery can use: the issuer is the one
/// listed, its metadata URL can be built, and every accepted URL passes the HTTP client's own
/// policy (`HTTPPolicy`), so discovery never accepts a server the client then refuses, nor
/// one that the client's policy would treat differently.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOAuthMetadata(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let response = InboundResponse(status: 200, headers: [("Content-Type", "application/json")], body: fuzzInput(start, count))
    let isObject = (try? JSONValue.parse(response.body))?.objectValue != nil
    for policy in [OAuthURLPolicy(), OAuthURLPolicy(allowInsecureLoopback: true)] {
        checkProtectedResource(response, isObject: isObject, policy: policy)
        checkAuthorizationServer(response, isObject: isObject, policy: policy)
    }
    return 0
}

private func checkProtectedResource(_ response: InboundResponse, isObject: Bool, policy: OAuthURLPolicy) {
    let url = "https://pds.example.com/.well-known/oauth-protected-resource"
    guard let metadata = try? ProtectedResourceMetadata(response: response, url: url) else { return }
    require(isObject, "protected-resource metadata read from a body that is not a JSON object")
    var fields: [String: JSONValue] = ["authorization_servers": .array(metadata.authorizationServers.map(JSONValue.string))]
    fields["resource"] = metadata.resource.map(JSONValue.string)
    fields["scopes_supported"] = metadata.scopesSupported.map { .array($0.map(JSONValue.string)) }
    let rewritten = InboundResponse(status: 200, headers: [], body: JSONValue.object(fields).encoded())
    require((try? ProtectedResourceMetadata(response: rewritten, url: url)) == metadata, "protected-resource metadata does not read back")

    ([metadata.resource].compactMap { $0 } + metadata.authorizationServers).forEach(checkOriginOf)
    let pdsOrigin = metadata.resource ?? "https://pds.example.com"
    guard let issuer = try? metadata.validatedIssuer(pdsOrigin: pdsOrigin, policy: policy) else { return }
    require(metadata.authorizationServers == [issuer], "the issuer is not the one authorization server listed")
    require(AuthorizationServerMetadata.url(issuer: issuer) != nil, "no metadata URL for the accepted issuer \(issuer)")
    requireClientAccepts(issuer, policy: policy)
}

private func checkAuthorizationServer(_ response: InboundResponse, isObject: Bool, policy: OAuthURLPolicy) {
    let url = "https://as.example.com/.well-known/oauth-authorization-server"
    guard let metadata = try? AuthorizationServerMetadata(response: response, url: url) else { return }
    require(isObject, "authorization server metadata read from a body that is not a JSON object")
    let rewritten = InboundResponse(status: 200, headers: [], body: json(of: metadata).encoded())
    require((try? AuthorizationServerMetadata(response: rewritten, url: url)) == metadata, "authorization server metadata does not read back")

    let urls = [metadata.issuer, metadata.authorizationEndpoint, metadata.tokenEndpoint,
                metadata.pushedAuthorizationRequestEndpoint, metadata.revocationEndpoint].compactMap { $0 }
    (urls + (metadata.protectedResources ?? [])).forEach(checkOriginOf)

    // The issuer it was fetched from is the one it names (else validation stops at rule 1).
    let expectedIssuer = metadata.issuer ?? "https://as.example.com"
    let pdsOrigins: [String?] = [nil] + (metadata.protectedResources?.prefix(1).map { $0 } ?? [])
    for pdsOrigin in pdsOrigins {
        guard let endpoints = try? metadata.validated(expectedIssuer: expectedIssuer, pdsOrigin: pdsOrigin, policy: policy) else {
            continue
        }
        require(endpoints.issuer == metadata.issuer, "the endpoints' issuer is not the document's")
        require(metadata.dpopSigningAlgValuesSupported.contains("ES256"), "accepted without ES256")
        require(metadata.requirePushedAuthorizationRequests, "accepted without required PAR")
        requireClientAccepts(endpoints.issuer, policy: policy)
        let urls = [endpoints.authorization, endpoints.token, endpoints.pushedAuthorizationRequest] + (endpoints.revocation.map { [$0] } ?? [])
        for endpoint in urls {
            require(endpoint.fragment == nil, "the endpoint \(endpoint) has a fragment")
            requireClientAccepts(endpoint.absoluteString, policy: policy)
        }
    }
}

/// The HTTP client checks every URL again with `HTTPPolicy`; with the same development flag
/// it must let through what discovery accepted.
private func requireClientAccepts(_ text: String, policy: OAuthURLPolicy) {
    guard let url = URL(string: text) else { return require(false, "the accepted URL \(text) does not parse as a URL") }
    do {
        try HTTPPolicy(allowInsecureLoopback: policy.allowInsecureLoopback).check(url)
    } catch {
        require(false, "discovery accepts \(text) (insecure loopback \(policy.allowInsecureLoopback)) but HTTPPolicy says: \(error)")
    }
}

/// `OAuthURLPolicy.origin(of:)` turns a PDS URL into the origin that discovery then checks
/// and compares with `resource`: it must be an origin itself, and its own origin.
private func checkOriginOf(_ text: String) {
    guard let url = URL(string: text), let origin = OAuthURLPolicy.origin(of: url) else { return }
    guard let again = URL(string: origin) else { return require(false, "the origin \(origin) of \(text) is not a URL") }
    require(OAuthURLPolicy.origin(of: again) == origin, "the origin of \(origin) (from \(text)) is not itself")
    do {
        try OAuthURLPolicy(allowInsecureLoopback: true).checkOrigin(origin, role: .resource)
    } catch .insecureURL {
        // Plain http to a host that is not loopback: refused by policy, still an origin.
    } catch {
        require(false, "the origin \(origin) of \(text) is refused: \(error)")
    }
}

private func json(of metadata: AuthorizationServerMetadata) -> JSONValue {
    var fields: [String: JSONValue] = [
        "require_pushed_authorization_requests": .bool(metadata.requirePushedAuthorizationRequests),
        "authorization_response_iss_parameter_supported": .bool(metadata.authorizationResponseISSParameterSupported),
        "client_id_metadata_document_supported": .bool(metadata.clientIDMetadataDocumentSupported),
        "dpop_signing_alg_values_supported": .array(metadata.dpopSigningAlgValuesSupported.map(JSONValue.string)),
    ]
    fields["issuer"] = metadata.issuer.map(JSONValue.string)
    fields["authorization_endpoint"] = metadata.authorizationEndpoint.map(JSONValue.string)
    fields["token_endpoint"] = metadata.tokenEndpoint.map(JSONValue.string)
    fields["pushed_authorization_request_endpoint"] = metadata.pushedAuthorizationRequestEndpoint.map(JSONValue.string)
    fields["revocation_endpoint"] = metadata.revocationEndpoint.map(JSONValue.string)
    fields["scopes_supported"] = metadata.scopesSupported.map { .array($0.map(JSONValue.string)) }
    fields["protected_resources"] = metadata.protectedResources.map { .array($0.map(JSONValue.string)) }
    return .object(fields)
}
