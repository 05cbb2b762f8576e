import Crypto
import Foundation
import WebBasics

/// The public half of a P-256 key as a JWK (RFC 7517/7518): `kty` EC, `crv` P-256, `x`, `y`.
///
/// Only the four required members are kept, so ``json`` is also the RFC 7638 thumbprint input.
public struct PublicJWK: Sendable, Hashable {
    /// The x coordinate, base64url of its 32 big-endian bytes.
    public let x: String
    /// The y coordinate, base64url of its 32 big-endian bytes.
    public let y: String

    public var keyType: String { "EC" }
    public var curve: String { "P-256" }

    /// The JWK of `publicKey`.
    public init(publicKey: P256.Signing.PublicKey) {
        // x963 is 0x04 || x || y, each coordinate 32 bytes.
        let point = Array(publicKey.x963Representation)
        x = Base64URL.encode(point[1..<33])
        y = Base64URL.encode(point[33..<65])
    }

    /// A JWK from its members (for instance a proof header's `jwk`); nil unless it is an EC
    /// P-256 public key (no private part) whose 32-byte coordinates are a point on the curve.
    public init?(_ members: Members) {
        guard members.kty == "EC", members.crv == "P-256", members.d == nil,
              let x = members.x, let y = members.y,
              let xBytes = Base64URL.decode(x), let yBytes = Base64URL.decode(y),
              xBytes.count == 32, yBytes.count == 32,
              (try? P256.Signing.PublicKey(x963Representation: [0x04] + xBytes + yBytes)) != nil
        else { return nil }
        self.x = x
        self.y = y
    }

    /// A JWK as it appears in JSON, not yet checked.
    public struct Members: Codable, Sendable, Equatable {
        public var kty: String?
        public var crv: String?
        public var x: String?
        public var y: String?
        /// Present only in private JWKs, which must never appear in a proof.
        public var d: String?

        public init(kty: String? = nil, crv: String? = nil, x: String? = nil, y: String? = nil, d: String? = nil) {
            self.kty = kty
            self.crv = crv
            self.x = x
            self.y = y
            self.d = d
        }
    }

    /// This key as JWK members (for JWKS documents).
    public var members: Members { Members(kty: keyType, crv: curve, x: x, y: y) }

    /// The CryptoKit public key, to verify signatures with.
    public func publicKey() throws -> P256.Signing.PublicKey {
        guard let xBytes = Base64URL.decode(x), let yBytes = Base64URL.decode(y) else { throw DPoPKeyError.malformedJWK }
        return try P256.Signing.PublicKey(x963Representation: [0x04] + xBytes + yBytes)
    }

    /// `{"crv":"P-256","kty":"EC","x":"…","y":"…"}`: the required members in lexicographic order
    /// and without whitespace, as RFC 7638 §3.2 asks for the thumbprint input.
    public var json: String {
        #"{"crv":"P-256","kty":"EC","x":"\#(x)","y":"\#(y)"}"#
    }

    /// The RFC 7638 JWK SHA-256 thumbprint, base64url: the `jkt` that binds tokens to this key.
    public var thumbprint: String {
        Base64URL.encode(SHA256.hash(data: Array(json.utf8)))
    }
}

/// Failures to load or read a DPoP key.
public enum DPoPKeyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The stored bytes are not a P-256 private key.
    case invalidPrivateKey
    /// A JWK that is not an EC P-256 public key.
    case malformedJWK

    public var description: String {
        switch self {
        case .invalidPrivateKey: "the stored DPoP key is not a P-256 private key"
        case .malformedJWK: "the JWK is not an EC P-256 public key"
        }
    }
}
