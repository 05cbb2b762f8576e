import Crypto
import Foundation
import WebBasics

/// Compact JWS (RFC 7515) signed with ES256 (RFC 7518 §3.4): the signature is the raw 64-byte
/// `r || s`, not DER, base64url-encoded without padding.
public enum ES256 {
    /// `header.payload.signature` for already-encoded header bytes (`headerPrefix` ends with the
    /// `.` separator) and raw payload bytes.
    static func compactJWS(headerPrefix: [UInt8], payload: [UInt8], key: P256.Signing.PrivateKey) throws -> String {
        var token = headerPrefix
        token.reserveCapacity(headerPrefix.count + payload.count * 4 / 3 + 90)
        Base64URL.append(payload, to: &token)
        let signature = try key.signature(for: token)
        token.append(UInt8(ascii: "."))
        Base64URL.append(signature.rawRepresentation, to: &token)
        return String(decoding: token, as: UTF8.self)
    }

    /// Signs a JWT whose header and payload are given as JSON text (used for client assertions,
    /// which are made once per token request, so clarity wins over speed here).
    public static func sign(headerJSON: String, payloadJSON: String, key: P256.Signing.PrivateKey) throws -> String {
        var prefix: [UInt8] = []
        Base64URL.append(Array(headerJSON.utf8), to: &prefix)
        prefix.append(UInt8(ascii: "."))
        return try compactJWS(headerPrefix: prefix, payload: Array(payloadJSON.utf8), key: key)
    }
}

/// A compact JWS split into its parts, not yet verified.
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
