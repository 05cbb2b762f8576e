import Crypto
import Foundation
import WebBasics

/// Makes DPoP proofs (RFC 9449 §4) with one session's key.
///
/// A proof is `{"typ":"dpop+jwt","alg":"ES256","jwk":…}` (encoded once per key) and the claims
/// `jti`, `htm`, `htu`, `iat`, plus `nonce` when the server gave one and `ath` on resource
/// requests. The claims are written straight into bytes: a proof costs little more than the
/// P-256 signature itself.
public struct DPoPSigner: Sendable {
    public let key: DPoPKey
    private let now: @Sendable () -> Date

    /// - Parameter now: the local clock (injectable for tests); the server's clock is this plus
    ///   the skew passed to ``proof(for:nonce:clockSkew:)``.
    public init(key: DPoPKey, now: @escaping @Sendable () -> Date = { Date() }) {
        self.key = key
        self.now = now
    }

    /// A proof for `request`.
    ///
    /// - Parameters:
    ///   - nonce: the latest `DPoP-Nonce` of the request's server, if any.
    ///   - clockSkew: seconds to add to the local clock to get the server's (see
    ///     ``ClockSkewEstimator``), so `iat` lands inside the server's short acceptance window.
    public func proof(for request: DPoPRequest, nonce: String? = nil, clockSkew: TimeInterval = 0) throws(DPoPError) -> String {
        let issuedAt = Int((now().timeIntervalSince1970 + clockSkew).rounded(.down))
        var claims: [UInt8] = []
        claims.reserveCapacity(160 + request.target.string.utf8.count + (nonce?.utf8.count ?? 0))
        // {"jti":"<128 random bits>": written straight from the random bytes, unique without
        // coordination (RFC 9449 asks for at least 96 bits).
        claims.append(contentsOf: #"{"jti":""#.utf8)
        var generator = SystemRandomNumberGenerator()
        withUnsafeBytes(of: (generator.next() as UInt64, generator.next() as UInt64)) { Base64URL.append($0, to: &claims) }
        claims.append(UInt8(ascii: "\""))
        ClaimsJSON.appendMember("htm", request.method, to: &claims)
        ClaimsJSON.appendMember("htu", request.target.string, to: &claims)
        ClaimsJSON.appendMember("iat", issuedAt, to: &claims)
        if let nonce { ClaimsJSON.appendMember("nonce", nonce, to: &claims) }
        if let ath = request.accessTokenHash { ClaimsJSON.appendMember("ath", ath, to: &claims) }
        claims.append(UInt8(ascii: "}"))
        do {
            return try ES256.compactJWS(headerPrefix: key.proofHeaderPrefix, payload: claims, key: key.privateKey)
        } catch {
            throw .signingFailed(String(describing: error))
        }
    }
}
