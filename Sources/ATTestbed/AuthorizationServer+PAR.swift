import Foundation
import JSONRPC
import WebBasics

/// Pushed authorization requests (RFC 9126): the only way to start an authorization here.
extension AuthorizationServer {
    static let requestURIPrefix = "urn:ietf:params:oauth:request_uri:req-"

    func pushAuthorization(_ request: TestbedRequest) throws(OAuthFailure) -> TestbedResponse {
        let form = try form(request)
        // Known before the proof is checked, so challenges count for the account being logged in.
        let loginHint = form["login_hint"].flatMap { $0.isEmpty ? nil : $0 }
        let hintedAccount = loginHint.flatMap { context.accounts.account(identifier: $0.hasPrefix("did:") ? $0 : $0.lowercased()) }
        let proof = try verifyProof(request, did: hintedAccount?.did)

        let (client, clientKeyID) = try authenticatedClient(form, did: hintedAccount?.did)
        guard try required("response_type", in: form) == "code" else {
            throw OAuthFailure(.badRequest, "unsupported_response_type", "Only response_type=code is supported")
        }
        let redirectURI = try required("redirect_uri", in: form)
        guard client.allowsRedirect(to: redirectURI) else {
            throw .invalidRequest("Invalid redirect_uri \(redirectURI) (not one of the client's)")
        }
        let scope = try required("scope", in: form)
        guard client.allowsScope(scope) else {
            throw OAuthFailure(.badRequest, "invalid_scope", "Scope \"\(scope)\" is not allowed for this client")
        }
        guard let method = form["code_challenge_method"], !method.isEmpty else {
            throw .invalidRequest("code_challenge_method is required (S256)")
        }
        guard method == "S256" else {
            throw .invalidRequest("Unsupported code_challenge_method \(method) (only S256)")
        }
        let challenge = try required("code_challenge", in: form)
        guard challenge.utf8.count == 43, Base64URL.decodeLeniently(challenge)?.count == 32 else {
            throw .invalidRequest("code_challenge must be a base64url SHA-256 digest")
        }
        if let loginHint, hintedAccount == nil {
            throw .invalidRequest("Invalid login_hint \(loginHint): no such account")
        }

        let lifetime = context.configuration.pushedRequestLifetime.seconds
        let pushed = PushedRequest(
            clientID: client.clientID, redirectURI: redirectURI, scope: scope, state: form["state"],
            codeChallenge: challenge, loginHintDID: hintedAccount?.did, clientKeyID: clientKeyID, thumbprint: proof.thumbprint,
            expiresAt: context.clock.now().addingTimeInterval(lifetime))
        let requestURI = Self.requestURIPrefix + Encodings.randomToken(bytes: 24)
        state.storage.withLock { storage in
            storage.pruneExpired(now: context.clock.now())
            storage.pushedRequests[requestURI] = pushed
        }
        oauth.metrics.record(did: hintedAccount?.did) { $0.pushedAuthorizationRequests += 1 }
        return .json(
            ["request_uri": .string(requestURI), "expires_in": .number(lifetime.rounded(.down))], status: .created)
    }
}
