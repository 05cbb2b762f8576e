/// Why a DPoP proof was refused. Descriptions follow the reference authorization server's
/// messages (bluesky-social/atproto oauth-provider) where it has one, so a client sees the same
/// words from the testbed as from a real server.
public enum DPoPVerificationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No `DPoP` header.
    case missingProof
    /// Not a compact JWS with JSON header and claims of the right types.
    case malformed(String)
    /// `typ` is not `dpop+jwt`.
    case wrongType
    /// `alg` is not ES256 (the only algorithm this server advertises).
    case unsupportedAlgorithm
    /// `jwk` missing, not an EC P-256 public key, or carrying a private part.
    case invalidKey
    /// The signature does not verify with the embedded key.
    case invalidSignature
    /// `jti` missing or empty.
    case missingJTI
    /// `htm` is not the request's method.
    case methodMismatch
    /// `htu` is not the request's normalised URI.
    case targetMismatch
    /// `iat` missing.
    case missingIssuedAt
    /// `iat` earlier than the acceptance window.
    case tooOld
    /// `iat` later than the acceptance window.
    case issuedInFuture
    /// No nonce, or one the server does not (or no longer) accept: answer `use_dpop_nonce`.
    case useNonce
    /// An access token was presented, and `ath` is missing or not its hash.
    case accessTokenHashMismatch
    /// `ath` on a request that presents no access token (the authorization server's endpoints).
    case accessTokenHashNotAllowed
    /// This `jti` was already used.
    case replayed
    /// The proof's key is not the one the token is bound to (`cnf.jkt`).
    case keyBindingMismatch

    public var description: String {
        switch self {
        case .missingProof: "DPoP proof required"
        case .malformed(let reason): "Invalid DPoP proof (\(reason))"
        case .wrongType: "Invalid DPoP proof (typ must be dpop+jwt)"
        case .unsupportedAlgorithm: "Invalid DPoP proof (alg must be ES256)"
        case .invalidKey: "Invalid DPoP proof (jwk must be a public EC P-256 key)"
        case .invalidSignature: "Invalid DPoP proof (signature verification failed)"
        case .missingJTI: "Invalid or missing jti property"
        case .methodMismatch: "DPoP htm mismatch"
        case .targetMismatch: "DPoP htu mismatch"
        case .missingIssuedAt: "Invalid DPoP proof (missing iat)"
        case .tooOld: "DPoP proof too old"
        case .issuedInFuture: "DPoP proof issued in the future"
        case .useNonce: "Authorization server requires nonce in DPoP proof"
        case .accessTokenHashMismatch: "DPoP ath mismatch"
        case .accessTokenHashNotAllowed: "DPoP ath not allowed"
        case .replayed: "DPoP proof replayed"
        case .keyBindingMismatch: "Invalid DPoP key binding"
        }
    }

    /// The OAuth `error` code a server answers with (RFC 9449 §12.2, RFC 6750 §3.1).
    public var oauthError: String {
        switch self {
        case .useNonce: "use_dpop_nonce"
        case .keyBindingMismatch: "invalid_token"
        default: "invalid_dpop_proof"
        }
    }
}
