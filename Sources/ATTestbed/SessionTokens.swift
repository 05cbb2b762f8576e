import Crypto
import Foundation
import JSONRPC
import WebBasics

/// The claims of the PDS's legacy session JWTs, as the reference PDS writes them.
struct TokenClaims: Codable, Sendable {
    var scope: String
    var sub: String
    var aud: String
    var iat: Int64
    var exp: Int64
    var jti: String
}

enum TokenScope {
    static let access = "com.atproto.access"
    /// The reference PDS scopes tokens from app-password logins this way.
    static let appPassword = "com.atproto.appPass"
    static let refresh = "com.atproto.refresh"
}

/// Why a presented JWT was not accepted, before any session lookup.
enum TokenVerificationFailure: Error {
    case malformed
    case badSignature
    case expired(TokenClaims)
}

/// HS256 signing and verification with a secret made fresh for each testbed.
struct TokenSigner: Sendable {
    private let key = SymmetricKey(size: .bits256)

    func sign(_ claims: TokenClaims, type: String) -> String {
        let header = Base64URL.encode(Array(#"{"typ":"\#(type)","alg":"HS256"}"#.utf8))
        let payload: JSONValue = [
            "scope": .string(claims.scope), "sub": .string(claims.sub), "aud": .string(claims.aud),
            "iat": .number(Double(claims.iat)), "exp": .number(Double(claims.exp)), "jti": .string(claims.jti),
        ]
        let signingInput = header + "." + Base64URL.encode(payload.encoded())
        let signature = HMAC<SHA256>.authenticationCode(for: Array(signingInput.utf8), using: key)
        return signingInput + "." + Base64URL.encode(Array(signature))
    }

    /// Checks signature and expiry (`exp <= now` is expired, as jose does).
    func verify(_ token: String, now: Date) -> Result<TokenClaims, TokenVerificationFailure> {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let signature = Base64URL.decodeLeniently(parts[2]),
            let payload = Base64URL.decodeLeniently(parts[1])
        else { return .failure(.malformed) }
        let signingInput = token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count)
        guard HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: Array(signingInput), using: key) else {
            return .failure(.badSignature)
        }
        guard let claims = try? JSONDecoder().decode(TokenClaims.self, from: Data(payload)) else {
            return .failure(.malformed)
        }
        if Double(claims.exp) <= now.timeIntervalSince1970 {
            return .failure(.expired(claims))
        }
        return .success(claims)
    }
}

/// An access/refresh pair as handed to a client.
struct IssuedTokens: Sendable {
    let accessJwt: String
    let accessJti: String
    let refreshJwt: String
    let refreshJti: String
    let refreshExpiresAt: Double
}

extension TokenSigner {
    func issuePair(
        did: String,
        audience: String,
        accessScope: String,
        now: Date,
        accessLifetime: Duration,
        refreshLifetime: Duration
    ) -> IssuedTokens {
        let issuedAt = Int64(now.timeIntervalSince1970)
        let access = TokenClaims(
            scope: accessScope, sub: did, aud: audience, iat: issuedAt,
            exp: issuedAt + max(1, Int64(accessLifetime.seconds.rounded())), jti: Encodings.randomToken())
        let refreshExpiry = issuedAt + max(1, Int64(refreshLifetime.seconds.rounded()))
        let refresh = TokenClaims(
            scope: TokenScope.refresh, sub: did, aud: audience, iat: issuedAt,
            exp: refreshExpiry, jti: Encodings.randomToken(bytes: 32))
        return IssuedTokens(
            accessJwt: sign(access, type: "at+jwt"),
            accessJti: access.jti,
            refreshJwt: sign(refresh, type: "refresh+jwt"),
            refreshJti: refresh.jti,
            refreshExpiresAt: Double(refreshExpiry)
        )
    }
}
