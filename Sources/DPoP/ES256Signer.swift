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
