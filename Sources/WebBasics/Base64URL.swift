import Foundation

/// base64url without padding (RFC 7515 §2), the encoding of every JWS segment and JWK member,
/// PKCE challenge and random token in the project: the one implementation all modules share.
///
/// Written by hand rather than through `Data.base64EncodedString()` plus character
/// replacement: proofs are made on every proxied call, and this avoids three intermediate strings.
public enum Base64URL {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Appends the encoding of `bytes` to `output`.
    public static func append(_ bytes: some Sequence<UInt8>, to output: inout [UInt8]) {
        let appended: Void? = bytes.withContiguousStorageIfAvailable { buffer in
            append(UnsafeRawBufferPointer(buffer), to: &output)
        }
        if appended == nil {
            Array(bytes).withUnsafeBytes { append($0, to: &output) }
        }
    }

    /// The encoding loop proper, on contiguous bytes: proofs go through here several times each,
    /// so it writes into preallocated space through pointers instead of appending per character.
    public static func append(_ bytes: UnsafeRawBufferPointer, to output: inout [UInt8]) {
        let count = bytes.count
        guard count > 0 else { return }
        let encodedCount = (count / 3) * 4 + [0, 2, 3][count % 3]
        let start = output.count
        output.append(contentsOf: repeatElement(0, count: encodedCount))
        alphabet.withUnsafeBufferPointer { table in
            output.withUnsafeMutableBufferPointer { out in
                var source = 0
                var target = start
                while source + 3 <= count {
                    let chunk = UInt32(bytes[source]) << 16 | UInt32(bytes[source + 1]) << 8 | UInt32(bytes[source + 2])
                    out[target] = table[Int(chunk >> 18)]
                    out[target + 1] = table[Int(chunk >> 12 & 0x3F)]
                    out[target + 2] = table[Int(chunk >> 6 & 0x3F)]
                    out[target + 3] = table[Int(chunk & 0x3F)]
                    source += 3
                    target += 4
                }
                switch count - source {
                case 1:
                    let chunk = UInt32(bytes[source]) << 16
                    out[target] = table[Int(chunk >> 18)]
                    out[target + 1] = table[Int(chunk >> 12 & 0x3F)]
                case 2:
                    let chunk = UInt32(bytes[source]) << 16 | UInt32(bytes[source + 1]) << 8
                    out[target] = table[Int(chunk >> 18)]
                    out[target + 1] = table[Int(chunk >> 12 & 0x3F)]
                    out[target + 2] = table[Int(chunk >> 6 & 0x3F)]
                default:
                    break
                }
            }
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
        decode(Array(text.utf8)[...], lenient: false)
    }

    /// Decodes base64url as other parties may write it: `=` padding, the `+` and `/` of plain
    /// base64, and non-zero leftover bits are all accepted.
    ///
    /// For reading what someone else issued (a PDS's access token, a client's PKCE challenge),
    /// where refusing an odd but unambiguous spelling would only lose information. Never for
    /// checking a signature's input, where ``decode(_:)`` keeps one spelling per value.
    public static func decodeLeniently(_ text: some StringProtocol) -> [UInt8]? {
        var input = Array(text.utf8)[...]
        // At most two: a third `=` is not padding, and Foundation refused it too.
        for _ in 0..<2 where input.last == UInt8(ascii: "=") { input = input.dropLast() }
        return decode(input, lenient: true)
    }

    private static func decode(_ input: ArraySlice<UInt8>, lenient: Bool) -> [UInt8]? {
        guard input.count % 4 != 1 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(input.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for character in input {
            guard let value = sextet(character) ?? (lenient ? standardSextet(character) : nil) else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // Leftover bits must be zero, or two different strings would decode to the same bytes.
        guard lenient || accumulator & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return output
    }

    private static func standardSextet(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "+"): 62
        case UInt8(ascii: "/"): 63
        default: nil
        }
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
