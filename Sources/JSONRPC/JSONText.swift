/// A JSON text kept as its bytes: checked once, then written out exactly as it came.
///
/// The proxy hands an upstream answer to its client this way, so the body keeps its key order
/// and its numbers to the last digit, and the daemon spends no time building values that it
/// would only encode again.
public struct JSONText: Sendable, Hashable {
    /// The text on one line: the line breaks a valid text can hold (white space between
    /// tokens; strings cannot contain raw ones) become spaces.
    public let bytes: [UInt8]

    /// Checks that `bytes` is one valid JSON text (RFC 8259, UTF-8) without building it.
    public init(validating bytes: [UInt8]) throws(JSONParseError) {
        try bytes.withUnsafeBufferPointer { buffer throws(JSONParseError) in
            var parser = JSONParser(buffer)
            try parser.skipValue(depth: 0)
            parser.skipWhitespace()
            guard parser.position == buffer.count else { throw parser.error("unexpected data after the JSON value") }
        }
        var oneLine = bytes
        if oneLine.contains(where: { $0 == 0x0A || $0 == 0x0D }) {
            for index in oneLine.indices where oneLine[index] == 0x0A || oneLine[index] == 0x0D {
                oneLine[index] = 0x20
            }
        }
        self.bytes = oneLine
    }

    /// Text the parser has already checked (one number literal, on one line).
    init(checked bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// The integer this text holds when it is an integer literal (any size), as its digits.
    public var integerLiteral: String? {
        guard let first = bytes.first, first == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first),
              bytes.dropFirst().allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The value this text holds.
    public var value: JSONValue {
        // Checked at init, so it parses; a text too large for a Double still reads as one.
        (try? JSONValue.parse(bytes)) ?? .null
    }
}

extension JSONParser {
    /// Moves past one value, checking it as `parseValue` does but building nothing.
    mutating func skipValue(depth: Int) throws(JSONParseError) {
        skipWhitespace()
        guard position < bytes.count else { throw error("unexpected end of input") }
        switch bytes[position] {
        case UInt8(ascii: "{"): try skipContainer(closing: UInt8(ascii: "}"), depth: depth + 1)
        case UInt8(ascii: "["): try skipContainer(closing: UInt8(ascii: "]"), depth: depth + 1)
        case UInt8(ascii: "\""): try skipString()
        case UInt8(ascii: "t"): try expectLiteral("true")
        case UInt8(ascii: "f"): try expectLiteral("false")
        case UInt8(ascii: "n"): try expectLiteral("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try scanNumber()
        default: throw error("unexpected character")
        }
    }

    /// An object (`"key": value` members) or an array (values), up to `closing`.
    private mutating func skipContainer(closing: UInt8, depth: Int) throws(JSONParseError) {
        guard depth <= JSONValue.maximumDepth else { throw error("nesting deeper than \(JSONValue.maximumDepth)") }
        let isObject = closing == UInt8(ascii: "}")
        position += 1
        skipWhitespace()
        if position < bytes.count, bytes[position] == closing {
            position += 1
            return
        }
        while true {
            if isObject {
                skipWhitespace()
                guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { throw error("expected a string key") }
                try skipString()
                skipWhitespace()
                guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else { throw error("expected ':'") }
                position += 1
            }
            try skipValue(depth: depth)
            skipWhitespace()
            guard position < bytes.count else { throw error("unexpected end of input") }
            switch bytes[position] {
            case UInt8(ascii: ","): position += 1
            case closing: position += 1; return
            default: throw error(isObject ? "expected ',' or '}'" : "expected ',' or ']'")
            }
        }
    }

    /// A string: its escapes checked as the parser reads them, its bytes as UTF-8.
    private mutating func skipString() throws(JSONParseError) {
        position += 1
        let start = position
        var sawNonASCII = false
        var scratch: [UInt8] = []
        while position < bytes.count {
            let byte = bytes[position]
            switch byte {
            case UInt8(ascii: "\""):
                if sawNonASCII, String(validating: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self) == nil {
                    throw error("invalid UTF-8 in string")
                }
                position += 1
                return
            case UInt8(ascii: "\\"):
                position += 1
                scratch.removeAll(keepingCapacity: true)
                try appendEscape(to: &scratch)
            case 0..<0x20:
                throw error("control character in string")
            default:
                if byte >= 0x80 { sawNonASCII = true }
                position += 1
            }
        }
        throw error("unterminated string")
    }
}
