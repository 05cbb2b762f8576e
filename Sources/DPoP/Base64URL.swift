import Foundation

/// base64url without padding (RFC 7515 §2), the encoding of every JWS segment and JWK member.
///
/// Written by hand rather than through `Data.base64EncodedString()` plus character
/// replacement: proofs are made on every proxied call, and this avoids three intermediate strings.
public enum Base64URL {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Appends the encoding of `bytes` to `output`.
    public static func append(_ bytes: some Sequence<UInt8>, to output: inout [UInt8]) {
        output.reserveCapacity(output.count + (bytes.underestimatedCount * 4 + 2) / 3)
        var iterator = bytes.makeIterator()
        while let b0 = iterator.next() {
            let b1 = iterator.next()
            let b2 = b1 == nil ? nil : iterator.next()
            output.append(alphabet[Int(b0 >> 2)])
            output.append(alphabet[Int((b0 & 0x03) << 4 | (b1 ?? 0) >> 4)])
            guard let b1 else { break }
            output.append(alphabet[Int((b1 & 0x0F) << 2 | (b2 ?? 0) >> 6)])
            guard let b2 else { break }
            output.append(alphabet[Int(b2 & 0x3F)])
        }
    }

    /// The encoding of `bytes` as a string.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var output: [UInt8] = []
        append(bytes, to: &output)
        return String(decoding: output, as: UTF8.self)
    }

    /// Decodes unpadded base64url; nil for padding, characters outside the alphabet, or an
    /// impossible length. Strict on purpose: a verifier must not accept two spellings of one value.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        let input = Array(text.utf8)
        guard input.count % 4 != 1 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(input.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for character in input {
            guard let value = sextet(character) else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // Leftover bits must be zero, or two different strings would decode to the same bytes.
        guard accumulator & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return output
    }

    private static func sextet(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): character - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): character - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): 62
        case UInt8(ascii: "_"): 63
        default: nil
        }
    }
}
