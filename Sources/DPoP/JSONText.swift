/// The little JSON writing that proofs need, straight into a byte buffer.
///
/// Foundation's `JSONEncoder` costs more than the P-256 signature itself for a claims set this
/// small; proof claims are a handful of strings and one integer, so they are written by hand.
enum JSONText {
    /// Appends `value` as a JSON string literal, escaping what RFC 8259 requires.
    static func appendString(_ value: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        // The common case (URLs, base64url, nonces) needs no escaping: copy it in one go.
        let copied = value.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            guard !bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else { return false }
            output.append(contentsOf: bytes)
            return true
        }
        if copied == true {
            output.append(UInt8(ascii: "\""))
            return
        }
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x00..<0x20:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                           hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]])
            default: output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }

    /// Appends `"name":"value"` (with a leading comma unless it is the first member).
    static func appendMember(_ name: StaticString, _ value: String, first: Bool = false, to output: inout [UInt8]) {
        appendName(name, first: first, to: &output)
        appendString(value, to: &output)
    }

    /// Appends `"name":<integer>`.
    static func appendMember(_ name: StaticString, _ value: Int, first: Bool = false, to output: inout [UInt8]) {
        appendName(name, first: first, to: &output)
        output.append(contentsOf: String(value).utf8)
    }

    private static func appendName(_ name: StaticString, first: Bool, to output: inout [UInt8]) {
        if !first { output.append(UInt8(ascii: ",")) }
        output.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { output.append(contentsOf: $0) }
        output.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
    }
}
