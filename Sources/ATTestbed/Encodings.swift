import Crypto
import Foundation
import WebBasics

/// The byte encodings atproto identifiers use: base32 (CIDs, did:plc), base32-sortable (TIDs),
/// base58btc (multikeys); base64url is WebBasics' `Base64URL`.
enum Encodings {
    private static let base32Alphabet = Array("abcdefghijklmnopqrstuvwxyz234567".utf8)
    private static let base58Alphabet = Array("123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz".utf8)
    static let sortableBase32Alphabet = Array("234567abcdefghijklmnopqrstuvwxyz".utf8)

    /// RFC 4648 base32, lower case, no padding (the multibase `b` alphabet).
    static func base32(_ bytes: some Sequence<UInt8>) -> String {
        var output: [UInt8] = []
        var buffer: UInt32 = 0
        var bitCount = 0
        for byte in bytes {
            buffer = (buffer << 8) | UInt32(byte)
            bitCount += 8
            while bitCount >= 5 {
                bitCount -= 5
                output.append(base32Alphabet[Int((buffer >> UInt32(bitCount)) & 31)])
            }
        }
        if bitCount > 0 {
            output.append(base32Alphabet[Int((buffer << UInt32(5 - bitCount)) & 31)])
        }
        return String(decoding: output, as: UTF8.self)
    }

    static func base58(_ bytes: [UInt8]) -> String {
        var digits: [UInt8] = []  // little-endian base-58 digits
        for byte in bytes {
            var carry = Int(byte)
            for index in digits.indices {
                carry += Int(digits[index]) << 8
                digits[index] = UInt8(carry % 58)
                carry /= 58
            }
            while carry > 0 {
                digits.append(UInt8(carry % 58))
                carry /= 58
            }
        }
        let leadingZeros = bytes.prefix { $0 == 0 }.count
        let encoded = [UInt8](repeating: base58Alphabet[0], count: leadingZeros)
            + digits.reversed().map { base58Alphabet[Int($0)] }
        return String(decoding: encoded, as: UTF8.self)
    }

    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// A random token safe for URLs and headers (JWT ids, sign-in codes).
    static func randomToken(bytes: Int = 16) -> String {
        Base64URL.encode(randomBytes(bytes))
    }
}

/// Content identifiers: CIDv1, SHA-256, base32 multibase.
enum ContentID {
    /// dag-cbor codec: records get `bafyrei…` CIDs like the reference PDS.
    static func record(_ bytes: some DataProtocol) -> String { make(codec: 0x71, bytes) }
    /// raw codec: blobs get `bafkrei…` CIDs like the reference PDS.
    static func blob(_ bytes: some DataProtocol) -> String { make(codec: 0x55, bytes) }

    private static func make(codec: UInt8, _ bytes: some DataProtocol) -> String {
        let digest = SHA256.hash(data: bytes)
        return "b" + Encodings.base32([0x01, codec, 0x12, 0x20] + Array(digest))
    }
}

enum Identifiers {
    /// `did:plc:` + 24 base32 characters, random (the real directory hashes the genesis op).
    static func randomPLC() -> String {
        "did:plc:" + Encodings.base32(Encodings.randomBytes(15)).prefix(24)
    }

    /// A `publicKeyMultibase` for a fresh P-256 key (multicodec 0x1200, compressed point).
    static func randomMultikey() -> String {
        let publicKey = P256.Signing.PrivateKey().publicKey
        return "z" + Encodings.base58([0x80, 0x24] + Array(publicKey.compressedRepresentation))
    }
}
