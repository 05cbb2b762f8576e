import Crypto
import DPoP
import Foundation

/// Checks DPoP proofs as an authorization server or PDS must (RFC 9449 §4.3): for the testbed,
/// so that the client is held to the rules a strict server enforces.
public struct DPoPVerifier: Sendable {
    /// How far `iat` may be from the server's clock, either way (the reference server allows
    /// about 10 seconds).
    public var issuedAtTolerance: TimeInterval
    /// Compare `htu` exactly with the normalised request URI (true), or normalise the claim
    /// first, as lenient servers do (false). Strict by default, to catch client mistakes.
    public var requiresExactTargetURI: Bool
    public let replayCache: DPoPReplayCache
    private let now: @Sendable () -> Date

    public init(issuedAtTolerance: TimeInterval = 10, requiresExactTargetURI: Bool = true,
                replayCache: DPoPReplayCache = DPoPReplayCache(), now: @escaping @Sendable () -> Date = { Date() }) {
        self.issuedAtTolerance = issuedAtTolerance
        self.requiresExactTargetURI = requiresExactTargetURI
        self.replayCache = replayCache
        self.now = now
    }

    /// Verifies the `DPoP` header of one request.
    ///
    /// - Parameters:
    ///   - proof: the `DPoP` header value (nil when absent).
    ///   - method, url: the request as the server received it.
    ///   - accessToken: the token presented with `Authorization: DPoP`, on resource requests;
    ///     nil on the authorization server's endpoints, where `ath` is then refused.
    ///   - boundThumbprint: the `cnf.jkt` of that token, or of the session (token and refresh
    ///     requests), which the proof's key must match.
    ///   - acceptedNonces: the nonces currently valid (previous, current, next); nil when this
    ///     server does not use nonces.
    /// - Returns: the proof's key thumbprint and claims, once every check passed; only then is
    ///   its `jti` recorded.
    public func verify(_ proof: String?, method: String, url: String, accessToken: String? = nil,
                       boundThumbprint: String? = nil, acceptedNonces: Set<String>? = nil)
        throws(DPoPVerificationError) -> VerifiedDPoPProof
    {
        guard let proof, !proof.isEmpty else { throw .missingProof }
        guard let jws = CompactJWS(proof) else { throw .malformed("not a compact JWS") }
        guard let header = jws.header(as: Header.self) else { throw .malformed("header is not a JSON object") }
        guard header.typ == "dpop+jwt" else { throw .wrongType }
        guard header.alg == "ES256" else { throw .unsupportedAlgorithm }
        guard let members = header.jwk, let jwk = PublicJWK(members), let key = try? jwk.publicKey() else {
            throw .invalidKey
        }
        guard jws.isSignedBy(key) else { throw .invalidSignature }
        guard let claims = jws.payload(as: Claims.self) else { throw .malformed("claims are not a JSON object of the DPoP shape") }

        guard let jti = claims.jti, !jti.isEmpty else { throw .missingJTI }
        guard claims.htm == method else { throw .methodMismatch }
        guard let htu = claims.htu, let expected = try? HTTPTargetURI(url), htuMatches(htu, expected) else {
            throw .targetMismatch
        }
        guard let iat = claims.iat else { throw .missingIssuedAt }
        let currentTime = now()
        let age = currentTime.timeIntervalSince1970 - iat
        guard age <= issuedAtTolerance else { throw .tooOld }
        guard age >= -issuedAtTolerance else { throw .issuedInFuture }
        if let acceptedNonces {
            guard let nonce = claims.nonce, acceptedNonces.contains(nonce) else { throw .useNonce }
        }
        if let accessToken {
            guard claims.ath == DPoPRequest.accessTokenHash(accessToken) else { throw .accessTokenHashMismatch }
        } else if claims.ath != nil {
            throw .accessTokenHashNotAllowed
        }
        let thumbprint = jwk.thumbprint
        if let boundThumbprint, boundThumbprint != thumbprint { throw .keyBindingMismatch }
        // Last, so that a refused proof does not use up its jti.
        let expiry = Date(timeIntervalSince1970: iat + issuedAtTolerance)
        guard replayCache.insertIfUnseen(jti, expiry: expiry, now: currentTime) else { throw .replayed }
        return VerifiedDPoPProof(thumbprint: thumbprint, jti: jti, issuedAt: Date(timeIntervalSince1970: iat),
                                 nonce: claims.nonce)
    }

    private func htuMatches(_ claimed: String, _ expected: HTTPTargetURI) -> Bool {
        if requiresExactTargetURI { return claimed == expected.string }
        return (try? HTTPTargetURI(claimed))?.string == expected.string
    }

    private struct Header: Decodable {
        var typ: String?
        var alg: String?
        var jwk: PublicJWK.Members?
    }

    private struct Claims: Decodable {
        var jti: String?
        var htm: String?
        var htu: String?
        var iat: Double?
        var nonce: String?
        var ath: String?
    }
}

/// What a verified proof establishes.
public struct VerifiedDPoPProof: Sendable, Equatable {
    /// The RFC 7638 thumbprint of the proof's key: what to bind issued tokens to (`cnf.jkt`).
    public var thumbprint: String
    public var jti: String
    public var issuedAt: Date
    public var nonce: String?
}
