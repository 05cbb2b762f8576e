import Foundation
import NIOHTTP1

/// The authorization endpoint: no login page, it approves at once for the hinted account (or
/// the testbed's default one) and redirects back with `code`, `state` and `iss` (RFC 9207).
extension AuthorizationServer {
    func authorize(_ request: TestbedRequest) throws(OAuthFailure) -> TestbedResponse {
        let clientID = try required("client_id", in: request.query)
        let requestURI = try required("request_uri", in: request.query)
        let now = context.clock.now()
        // A request_uri is used once, whatever the outcome.
        let pushed = state.storage.withLock { $0.pushedRequests.removeValue(forKey: requestURI) }
        guard let pushed else { throw .invalidRequest("Unknown request_uri") }
        guard now < pushed.expiresAt else { throw .invalidRequest("This request has expired") }
        guard pushed.clientID == clientID else { throw .invalidRequest("request_uri was pushed by another client") }
        guard let did = pushed.loginHintDID ?? approvalDID() else {
            return redirect(pushed, parameters: [("error", "access_denied"), ("error_description", "No account to approve")])
        }
        let code = "cod-" + Encodings.randomToken(bytes: 24)
        let expiresAt = now.addingTimeInterval(context.configuration.authorizationCodeLifetime.seconds)
        state.storage.withLock { $0.codes[code] = IssuedCode(request: pushed, did: did, expiresAt: expiresAt) }
        oauth.metrics.record(did: did) { $0.authorizationsApproved += 1 }
        return redirect(pushed, parameters: [("code", code)])
    }

    /// The default account: the one set through the testbed's API, else the first created.
    private func approvalDID() -> String? {
        oauth.defaultApprovalDID.withLock { $0 } ?? context.accounts.all.first?.did
    }

    /// 302 to the client's redirect URI with the parameters, `state` and `iss` added.
    private func redirect(_ pushed: PushedRequest, parameters: [(String, String)]) -> TestbedResponse {
        var parameters = parameters
        if let state = pushed.state { parameters.append(("state", state)) }
        let iss = oauth.misbehaviours.isEnabled(.wrongIssuerInRedirect) && state.host == oauth.issuer.host
            ? context.url(host: oauth.rogueIssuer.host) : issuer
        parameters.append(("iss", iss))
        let query = parameters.map { Self.percentEncode($0.0) + "=" + Self.percentEncode($0.1) }.joined(separator: "&")
        let separator = pushed.redirectURI.contains("?") ? "&" : "?"
        return TestbedResponse(status: .found, headers: ["Location": pushed.redirectURI + separator + query])
    }

    /// Everything but RFC 3986 unreserved characters escaped (`%20` for spaces). ASCII only:
    /// `CharacterSet.alphanumerics` would let non-ASCII letters into the Location header.
    static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    static func percentEncode(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }
}
