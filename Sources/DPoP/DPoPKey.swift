import Crypto
import Foundation
import WebBasics

/// One session's DPoP key: an ES256 (P-256) private key, with the parts of every proof that
/// depend only on the key computed once.
///
/// Keep the same key for the whole session (PAR, token exchange, refreshes, PDS calls): tokens
/// are bound to its thumbprint, and a new key ends the session.
public struct DPoPKey: Sendable {
    public let privateKey: P256.Signing.PrivateKey
    /// The public JWK that goes into every proof header.
    public let publicJWK: PublicJWK
    /// The RFC 7638 thumbprint (`jkt`) the server binds tokens to.
    public let thumbprint: String
    /// base64url of `{"typ":"dpop+jwt","alg":"ES256","jwk":…}` followed by the `.` separator:
    /// identical in every proof of this key, so encoded once.
    let proofHeaderPrefix: [UInt8]

    /// Wraps an existing private key.
    public init(privateKey: P256.Signing.PrivateKey) {
        self.privateKey = privateKey
        publicJWK = PublicJWK(publicKey: privateKey.publicKey)
        thumbprint = publicJWK.thumbprint
        let header = #"{"typ":"dpop+jwt","alg":"ES256","jwk":\#(publicJWK.json)}"#
        var prefix: [UInt8] = []
        Base64URL.append(Array(header.utf8), to: &prefix)
        prefix.append(UInt8(ascii: "."))
        proofHeaderPrefix = prefix
    }

    /// A new random key, for a new session.
    public static func generate() -> DPoPKey {
        DPoPKey(privateKey: P256.Signing.PrivateKey())
    }

    /// Restores a key saved with ``rawRepresentation`` (the 32-byte private scalar).
    public init(rawRepresentation: some ContiguousBytes) throws(DPoPKeyError) {
        do {
            self.init(privateKey: try P256.Signing.PrivateKey(rawRepresentation: rawRepresentation))
        } catch {
            throw .invalidPrivateKey
        }
    }

    /// The private scalar, for the sealed account secrets (`AccountSecrets.dpopPrivateKey`).
    /// Secret: never log it, never store it unsealed.
    public var rawRepresentation: Data { privateKey.rawRepresentation }
}

extension DPoPKey: CustomStringConvertible, CustomDebugStringConvertible {
    // Interpolating a key into a log line shows which key, never the key.
    public var description: String { "DPoPKey(jkt: \(thumbprint), private part redacted)" }
    public var debugDescription: String { description }
}
