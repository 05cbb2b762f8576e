import Crypto
import Foundation
import JSONRPC
import WebBasics

/// The claims of an OAuth access token: an `at+jwt` bound to a DPoP key by `cnf.jkt`.
struct OAuthAccessClaims: Sendable {
    var issuer: String
    var subject: String
    var audience: String
    var clientID: String
    var scope: String
    var issuedAt: Int64
    var expiresAt: Int64
    var jti: String
    /// The RFC 7638 thumbprint of the session's DPoP key (`cnf.jkt`).
    var thumbprint: String
}

/// HS256 access tokens with a secret of one authorization server: the PDS trusts only its own
/// issuer's key, so tokens from the rogue issuer fail verification there.
struct OAuthAccessTokenSigner: Sendable {
    private let key = SymmetricKey(size: .bits256)

    func sign(_ claims: OAuthAccessClaims) -> String {
        let header = Base64URL.encode(Array(#"{"typ":"at+jwt","alg":"HS256"}"#.utf8))
        let payload: JSONValue = [
            "iss": .string(claims.issuer), "sub": .string(claims.subject), "aud": .string(claims.audience),
            "client_id": .string(claims.clientID), "scope": .string(claims.scope),
            "iat": .number(Double(claims.issuedAt)), "exp": .number(Double(claims.expiresAt)),
            "jti": .string(claims.jti), "cnf": ["jkt": .string(claims.thumbprint)],
        ]
        let signingInput = header + "." + Base64URL.encode(payload.encoded())
        let signature = HMAC<SHA256>.authenticationCode(for: Array(signingInput.utf8), using: key)
        return signingInput + "." + Base64URL.encode(Array(signature))
    }

    /// The claims when the signature is this signer's; expiry is left to the caller.
    func verify(_ token: String) -> OAuthAccessClaims? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let signature = Base64URL.decodeLeniently(parts[2]),
            let payload = Base64URL.decodeLeniently(parts[1])
        else { return nil }
        let signingInput = token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count)
        guard HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: Array(signingInput), using: key),
            let claims = try? JSONValue.parse(payload),
            let issuer = claims["iss"]?.stringValue, let subject = claims["sub"]?.stringValue,
            let audience = claims["aud"]?.stringValue, let clientID = claims["client_id"]?.stringValue,
            let scope = claims["scope"]?.stringValue, let issuedAt = claims["iat"]?.doubleValue,
            let expiresAt = claims["exp"]?.doubleValue, let jti = claims["jti"]?.stringValue,
            let thumbprint = claims["cnf"]?["jkt"]?.stringValue
        else { return nil }
        return OAuthAccessClaims(
            issuer: issuer, subject: subject, audience: audience, clientID: clientID, scope: scope,
            issuedAt: Int64(issuedAt), expiresAt: Int64(expiresAt), jti: jti, thumbprint: thumbprint)
    }
}
