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
    ///
    /// Accepts exactly what ``JSONValue/parse(_:)`` accepts: the same scanner reads both, so
    /// the same depth limit, numbers of any size, and repeated keys.
    public init(validating bytes: [UInt8]) throws(JSONParseError) {
        try bytes.withUnsafeBufferPointer { buffer throws(JSONParseError) in
            var parser = JSONParser(buffer)
            try parser.scanText(JSONSkipper.self)
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
        // Checked at init, and the parser accepts what the validator does: this cannot fail.
        (try? JSONValue.parse(bytes)) ?? .null
    }
}

/// The validator's sink: builds nothing, so checking a text allocates nothing per value.
enum JSONSkipper: JSONSink {
    typealias Value = Void
    typealias Members = Void
    typealias Elements = Void

    static var decodesStrings: Bool { false }
    static func literal(_ value: JSONValue) {}
    static func number(_ literal: UnsafeBufferPointer<UInt8>) {}
    static func string(_ string: String) {}
    static func emptyMembers() {}
    static func add(_ key: String, _ value: Void, to members: inout Void) {}
    static func object(_ members: Void) {}
    static func emptyElements() {}
    static func append(_ value: Void, to elements: inout Void) {}
    static func array(_ elements: Void) {}
}

extension JSONParser {
    /// Moves past one value, `depth` containers deep, checking it as parsing does (the same scanner).
    mutating func skipValue(depth: Int) throws(JSONParseError) {
        try scanValue(JSONSkipper.self, depth: depth)
    }
}
