import Crypto
import DPoP
import Foundation

/// A confidential client's ES256 signing key, published in its JWKS and used for
/// `private_key_jwt` client assertions.
///
/// The key id must stay the same for the whole of a session: the server records which key
/// authenticated the session and refuses refreshes signed with another.
public struct ClientSigningKey: Sendable {
    public let keyID: String
    public let privateKey: P256.Signing.PrivateKey
    public let publicJWK: PublicJWK

    public init(keyID: String, privateKey: P256.Signing.PrivateKey) {
        self.keyID = keyID
        self.privateKey = privateKey
        publicJWK = PublicJWK(publicKey: privateKey.publicKey)
    }

    /// Restores a key stored as its raw private scalar.
    public init(keyID: String, rawRepresentation: some ContiguousBytes) throws(DPoPKeyError) {
        do {
            self.init(keyID: keyID, privateKey: try P256.Signing.PrivateKey(rawRepresentation: rawRepresentation))
        } catch {
            throw .invalidPrivateKey
        }
    }

    /// The JWKS entry: `kty`, `crv`, `x`, `y`, `kid`, `alg` ES256, `use` sig.
    public var jwk: JWK {
        JWK(kty: publicJWK.keyType, crv: publicJWK.curve, x: publicJWK.x, y: publicJWK.y,
            kid: keyID, alg: "ES256", use: "sig")
    }

    /// A public key as published in a JWKS document.
    public struct JWK: Codable, Sendable, Equatable {
        public var kty: String
        public var crv: String
        public var x: String
        public var y: String
        public var kid: String
        public var alg: String
        public var use: String
    }
}

extension ClientSigningKey: CustomStringConvertible, CustomDebugStringConvertible {
    public var description: String { "ClientSigningKey(kid: \(keyID), private part redacted)" }
    public var debugDescription: String { description }
}

/// `{"keys": [...]}`, the document at `jwks_uri` or inline as `jwks`.
public struct JWKSet: Codable, Sendable, Equatable {
    public var keys: [ClientSigningKey.JWK]

    public init(keys: [ClientSigningKey.JWK]) {
        self.keys = keys
    }
}
