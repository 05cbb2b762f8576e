import DPoP
import Foundation
import JSONRPC
import NIOHTTP1

/// An OAuth authorization server as strict as the reference one (bluesky-social/atproto
/// oauth-provider): metadata, PAR (required), authorize (auto-approving), token and revocation
/// endpoints, DPoP with rotating nonces on every endpoint that takes a proof.
///
/// The testbed runs two: the PDS's own issuer at `auth.<domain>`, and a rogue one at
/// `rogue-auth.<domain>` that works the same way but is not the authorization server of any
/// DID's PDS, so clients can be caught trusting tokens from the wrong issuer.
struct AuthorizationServer: Sendable {
    let context: TestbedContext
    let state: AuthorizationServerState

    var issuer: String { context.url(host: state.host) }
    var oauth: TestbedOAuth { context.oauth }

    func handle(_ request: TestbedRequest) -> TestbedResponse {
        let receivedAt = context.clock.now()
        var response: TestbedResponse
        var recordedAs: OAuthEndpoint?
        switch (request.method, request.path) {
        case (.GET, "/.well-known/oauth-authorization-server"):
            response = answer(.metadata) { metadata() }
        case (.POST, "/oauth/par"):
            recordedAs = .pushedAuthorization
            response = answer(.pushedAuthorization) { () throws(OAuthFailure) in try pushAuthorization(request) }
        case (.GET, "/oauth/authorize"):
            response = answer(.authorize) { () throws(OAuthFailure) in try authorize(request) }
        case (.POST, "/oauth/token"):
            recordedAs = .token
            response = answer(.token) { () throws(OAuthFailure) in try token(request) }
        case (.POST, "/oauth/revoke"):
            recordedAs = .revocation
            response = answer(.revocation) { () throws(OAuthFailure) in try revoke(request) }
        case (_, "/"):
            response = .text("atproto testbed authorization server \(issuer)\n")
        default:
            response = OAuthFailure(.notFound, "not_found", "No such endpoint").response
        }
        // The endpoints that take a proof keep it, for independent checks in tests.
        if let recordedAs { record(request, endpoint: recordedAs, receivedAt: receivedAt, response: response) }
        // Every answer carries the current nonce, so clients rarely meet a challenge.
        response.headers.replaceOrAdd(name: "DPoP-Nonce", value: state.nonces.issue())
        response.headers.replaceOrAdd(name: "Cache-Control", value: "no-store")
        return response
    }

    /// Runs an endpoint, unless a failure was injected for it.
    private func answer(_ endpoint: OAuthEndpoint, _ body: () throws(OAuthFailure) -> TestbedResponse) -> TestbedResponse {
        if let failure = context.failures.take(nsid: endpoint.failureKey) {
            let error = failure.errorName ?? (failure.status == 429 ? "rate_limit_exceeded" : "server_error")
            var response = failure.html
                ? .html(status: HTTPResponseStatus(statusCode: failure.status))
                : OAuthFailure(HTTPResponseStatus(statusCode: failure.status), error, "injected failure (\(failure.status))").response
            if let seconds = failure.retryAfterSeconds {
                response.headers.replaceOrAdd(name: "Retry-After", value: String(seconds))
            }
            return response
        }
        do {
            return try body()
        } catch {
            return error.response
        }
    }

    /// RFC 8414 metadata with the fields the atproto profile requires.
    func metadata() -> TestbedResponse {
        .json([
            "issuer": .string(issuer),
            "authorization_endpoint": .string(issuer + "/oauth/authorize"),
            "token_endpoint": .string(issuer + "/oauth/token"),
            "pushed_authorization_request_endpoint": .string(issuer + "/oauth/par"),
            "revocation_endpoint": .string(issuer + "/oauth/revoke"),
            "require_pushed_authorization_requests": true,
            "authorization_response_iss_parameter_supported": true,
            "client_id_metadata_document_supported": true,
            "dpop_signing_alg_values_supported": ["ES256"],
            "code_challenge_methods_supported": ["S256"],
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "scopes_supported": ["atproto", "transition:generic", "transition:chat.bsky", "transition:email"],
            "subject_types_supported": ["public"],
            "token_endpoint_auth_methods_supported": ["none", "private_key_jwt"],
            "token_endpoint_auth_signing_alg_values_supported": ["ES256"],
            "request_parameter_supported": false,
            "request_uri_parameter_supported": true,
            "require_request_uri_registration": true,
            "protected_resources": [.string(context.pdsURL), .string(context.pdsAliasURL)],
        ])
    }

    // MARK: - Shared by the endpoints

    /// The form body's fields (first value wins).
    func form(_ request: TestbedRequest) throws(OAuthFailure) -> [String: String] {
        let contentType = request.headers.first(name: "content-type")?.lowercased() ?? ""
        guard contentType.hasPrefix("application/x-www-form-urlencoded") else {
            throw .invalidRequest("Content-Type must be application/x-www-form-urlencoded")
        }
        let text = String(decoding: request.body.readableBytesView, as: UTF8.self)
        return TestbedRequest.parseQuery(Substring(text))
    }

    func required(_ name: String, in form: [String: String]) throws(OAuthFailure) -> String {
        guard let value = form[name], !value.isEmpty else { throw .invalidRequest("Missing \(name) parameter") }
        return value
    }

    /// The rules of the request's client, authenticated (a confidential client's assertion is
    /// checked); returns them with the assertion's `kid`. Failures count for `did` when known.
    func authenticatedClient(_ form: [String: String], did: String?) throws(OAuthFailure)
        -> (rules: OAuthClientRules, keyID: String?)
    {
        do {
            let rules = try OAuthClientRules.resolve(
                try required("client_id", in: form), directory: oauth.clients,
                clientsOrigin: context.url(host: oauth.clientsHost))
            return (rules, try state.assertions.authenticate(form, client: rules, issuer: issuer))
        } catch {
            oauth.metrics.record(did: did) { $0.clientAuthenticationFailures += 1 }
            throw error
        }
    }

    /// Verifies the request's DPoP proof (nonce required); counts challenges and rejections for
    /// `did` when known.
    func verifyProof(_ request: TestbedRequest, boundThumbprint: String? = nil, did: String?)
        throws(OAuthFailure) -> VerifiedDPoPProof
    {
        do {
            return try state.verifier.verify(
                request.headers.first(name: "dpop"), method: request.method.rawValue, url: issuer + request.path,
                boundThumbprint: boundThumbprint, acceptedNonces: state.nonces.accepted())
        } catch .useNonce {
            oauth.metrics.record(did: did) { $0.authorizationServerNonceChallenges += 1 }
            throw OAuthFailure(.badRequest, "use_dpop_nonce", DPoPVerificationError.useNonce.description)
        } catch {
            oauth.metrics.record(did: did) { $0.dpopRejections[error.description, default: 0] += 1 }
            throw OAuthFailure(.badRequest, error.oauthError, error.description)
        }
    }
}
