extension JSONParser {
    /// Reads one string and returns its contents.
    mutating func parseString() throws(JSONParseError) -> String {
        try scanString(decoding: true)
    }

    /// Moves past one string (at its opening quote): no raw control characters, known escapes
    /// only, surrogates paired, the bytes valid UTF-8. Returns the contents when `decoding`,
    /// else an empty string; the checks are the same either way.
    mutating func scanString(decoding: Bool) throws(JSONParseError) -> String {
        position += 1
        let start = position
        var isASCII = true
        // The contents once an escape has been seen; before that, the raw bytes are them.
        var decoded: [UInt8] = []
        var hasEscapes = false
        while position < bytes.count {
            let byte = bytes[position]
            switch byte {
            case UInt8(ascii: "\""):
                let raw = UnsafeBufferPointer(rebasing: bytes[start..<position])
                if decoding, !hasEscapes {
                    guard let string = String(validating: raw, as: UTF8.self) else { throw error("invalid UTF-8 in string") }
                    position += 1
                    return string
                }
                // Escapes are ASCII and decode to whole UTF-8 sequences, so checking the raw
                // bytes checks the decoded ones too.
                if !isASCII, String(validating: raw, as: UTF8.self) == nil { throw error("invalid UTF-8 in string") }
                position += 1
                return decoding ? String(decoding: decoded, as: UTF8.self) : ""
            case UInt8(ascii: "\\"):
                if decoding, !hasEscapes { decoded = Array(UnsafeBufferPointer(rebasing: bytes[start..<position])) }
                hasEscapes = true
                position += 1
                let scalar = try scanEscape()
                if decoding { UTF8.encode(scalar) { decoded.append($0) } }
            case 0..<0x20:
                throw error("control character in string")
            default:
                if byte >= 0x80 { isASCII = false }
                if decoding, hasEscapes { decoded.append(byte) }
                position += 1
            }
        }
        throw error("unterminated string")
    }

    /// One escape, after its backslash; a `\u` high surrogate takes its low one with it.
    mutating func scanEscape() throws(JSONParseError) -> Unicode.Scalar {
        guard position < bytes.count else { throw error("unterminated string") }
        let byte = bytes[position]
        position += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): return Unicode.Scalar(byte)
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            var code = try scanHex4()
            if (0xD800...0xDBFF).contains(code) {
                // A lone surrogate is no character: it could not be written out as UTF-8.
                guard position + 1 < bytes.count, bytes[position] == UInt8(ascii: "\\"), bytes[position + 1] == UInt8(ascii: "u") else {
                    throw error("unpaired surrogate")
                }
                position += 2
                let low = try scanHex4()
                guard (0xDC00...0xDFFF).contains(low) else { throw error("unpaired surrogate") }
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(code) {
                throw error("unpaired surrogate")
            }
            guard let scalar = Unicode.Scalar(code) else { throw error("invalid escape") }
            return scalar
        default:
            throw error("invalid escape")
        }
    }

    mutating func scanHex4() throws(JSONParseError) -> UInt32 {
        guard position + 4 <= bytes.count else { throw error("invalid \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error("invalid \\u escape")
            }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }
}
