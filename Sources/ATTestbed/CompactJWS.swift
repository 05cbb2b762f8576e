import Crypto
import Foundation
import WebBasics

/// A compact JWS split into its parts, not yet verified: what a server does with a client's
/// proofs and assertions, so it lives with the testbed's servers rather than in the client's DPoP.
public struct CompactJWS: Sendable {
    /// The decoded header JSON.
    public let headerJSON: [UInt8]
    /// The decoded payload JSON.
    public let payloadJSON: [UInt8]
    /// The bytes the signature covers: `base64url(header) . base64url(payload)`.
    public let signingInput: [UInt8]
    public let signature: [UInt8]

    /// Splits and decodes `token`; nil unless it has three non-empty base64url parts.
    public init?(_ token: some StringProtocol) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ !$0.isEmpty }),
              let header = Base64URL.decode(parts[0]), let payload = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2])
        else { return nil }
        headerJSON = header
        payloadJSON = payload
        signingInput = Array(parts[0].utf8) + [UInt8(ascii: ".")] + Array(parts[1].utf8)
        self.signature = signature
    }

    /// The header decoded as `T`; nil when it is not JSON of that shape.
    public func header<T: Decodable>(as type: T.Type) -> T? {
        try? JSONDecoder().decode(T.self, from: Data(headerJSON))
    }

    /// The payload decoded as `T`; nil when it is not JSON of that shape.
    public func payload<T: Decodable>(as type: T.Type) -> T? {
        try? JSONDecoder().decode(T.self, from: Data(payloadJSON))
    }

    /// True when `signature` is a valid ES256 signature of the signing input by `key`.
    public func isSignedBy(_ key: P256.Signing.PublicKey) -> Bool {
        guard signature.count == 64,
              let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature) else { return false }
        return key.isValidSignature(ecdsa, for: signingInput)
    }
}
