extension JSONValue {
    /// Compact UTF-8 JSON on one line, object keys sorted, slashes not escaped (a
    /// ``JSONValue/verbatim(_:)`` text as it came).
    ///
    /// Never contains a raw newline, so the result can always be framed as one line.
    public func encoded() -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(256)
        append(to: &output)
        return output
    }

    /// Appends the compact encoding of this value to `output`.
    public func append(to output: inout [UInt8]) {
        switch self {
        case .null: output.append(contentsOf: "null".utf8)
        case .bool(let b): output.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n): Self.appendNumber(n, to: &output)
        case .string(let s): Self.appendString(s, to: &output)
        case .verbatim(let text): output.append(contentsOf: text.bytes)
        case .array(let elements):
            output.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                element.append(to: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let fields):
            output.append(UInt8(ascii: "{"))
            for (index, key) in fields.keys.sorted().enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                Self.appendString(key, to: &output)
                output.append(UInt8(ascii: ":"))
                fields[key]!.append(to: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    static func appendNumber(_ n: Double, to output: inout [UInt8]) {
        if n.rounded() == n, abs(n) < JSONBuilder.largestWrittenInteger {
            output.append(contentsOf: String(Int64(n)).utf8)
        } else if n.isFinite {
            output.append(contentsOf: n.description.utf8)
        } else {
            output.append(contentsOf: "null".utf8)  // JSON has no infinities or NaN
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// Appends `string` as a JSON string literal, escaping what RFC 8259 requires (and no more:
    /// slashes and non-ASCII text stay as they are).
    public static func appendString(_ string: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        // The common case (identifiers, URLs, base64url, nonces) needs no escaping: one copy.
        let copied = string.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            guard !bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else {
                return false
            }
            output.append(contentsOf: bytes)
            return true
        }
        if copied != true {
            for byte in string.utf8 {
                switch byte {
                case UInt8(ascii: "\""): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
                case UInt8(ascii: "\\"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
                case 0x0A: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
                case 0x0D: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
                case 0x09: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
                case 0..<0x20:
                    output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                               hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0xF)]])
                default: output.append(byte)
                }
            }
        }
        output.append(UInt8(ascii: "\""))
    }
}
