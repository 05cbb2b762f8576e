import Foundation

/// What a server's refusal means for DPoP, read from the status, `WWW-Authenticate` and body.
public enum DPoPChallenge: Sendable, Equatable {
    /// The server wants a (fresh) nonce: retry once with the `DPoP-Nonce` it sent.
    case useNonce
    /// The access token is expired, revoked or not bound to this key: refresh, don't retry.
    case invalidToken(description: String?)

    /// Classifies a response; nil when it is neither challenge.
    ///
    /// The authorization server asks for a nonce with `400 {"error":"use_dpop_nonce"}`, a PDS
    /// with `401` and `WWW-Authenticate: DPoP error="use_dpop_nonce"`. Either form is accepted
    /// with either status, since servers differ and both forms mean the same.
    public static func classify(status: Int, wwwAuthenticate: String?, body: some Collection<UInt8>) -> DPoPChallenge? {
        guard status == 400 || status == 401 else { return nil }
        let challenge = wwwAuthenticate.flatMap { header in
            AuthenticateChallenge.parse(header).first { $0.scheme == "dpop" && $0.parameters["error"] != nil }
        }
        let bodyError = errorCode(inBody: body)
        if challenge?.parameters["error"] == "use_dpop_nonce" || bodyError == "use_dpop_nonce" { return .useNonce }
        if status == 401, let challenge, challenge.parameters["error"] == "invalid_token" {
            return .invalidToken(description: challenge.parameters["error_description"])
        }
        return nil
    }

    /// True when the response asks for a DPoP nonce (either form, either status).
    public static func isNonceChallenge(status: Int, wwwAuthenticate: String?, body: some Collection<UInt8>) -> Bool {
        classify(status: status, wwwAuthenticate: wwwAuthenticate, body: body) == .useNonce
    }

    /// True when the server refused the proof itself (`invalid_dpop_proof`, either form): with
    /// a stepped clock, a proof signed again with the corrected `iat` may pass.
    public static func isProofRefused(status: Int, wwwAuthenticate: String?, body: some Collection<UInt8>) -> Bool {
        guard status == 400 || status == 401 else { return false }
        let challenge = wwwAuthenticate.flatMap { header in
            AuthenticateChallenge.parse(header).first { $0.scheme == "dpop" && $0.parameters["error"] != nil }
        }
        return challenge?.parameters["error"] == "invalid_dpop_proof" || errorCode(inBody: body) == "invalid_dpop_proof"
    }

    /// The `error` member of a JSON object body, if there is one. Only small bodies are parsed:
    /// an OAuth error body is a few hundred bytes, and anything else is not one.
    static func errorCode(inBody body: some Collection<UInt8>) -> String? {
        guard !body.isEmpty, body.count <= 16_384,
              let object = try? JSONDecoder().decode(ErrorBody.self, from: Data(body)) else { return nil }
        return object.error
    }

    private struct ErrorBody: Decodable {
        var error: String?
    }
}
