/// A JSON text that does not parse, with the byte offset where it went wrong.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String
    public var offset: Int

    public var description: String { "\(reason) at byte \(offset)" }
}

extension JSONValue {
    /// Nesting deeper than this is refused, so hostile input cannot exhaust the stack.
    public static let maximumDepth = 512

    /// Parses one JSON text (RFC 8259: any top-level value, surrounding white space allowed).
    ///
    /// Accepts exactly what ``JSONText/init(validating:)`` accepts (one grammar serves both,
    /// docs/JSON.md):
    /// - at most ``maximumDepth`` nested arrays and objects;
    /// - any number the grammar allows, whatever its size: one a Double cannot hold (beyond
    ///   its range, like `1e999`, or an integer of 16 digits or more beyond ±9.0e15) becomes
    ///   ``verbatim(_:)`` text, so it is written back unchanged;
    /// - a key given twice in one object: the last value wins (as in ECMAScript's
    ///   `JSON.parse`; Foundation's `JSONDecoder` keeps the first).
    ///
    /// Hand-written because every request and every proxied response goes through it, and
    /// Foundation's decoders cost several times more for the same work.
    public static func parse(_ bytes: some Collection<UInt8>) throws(JSONParseError) -> JSONValue {
        let array = bytes as? [UInt8] ?? Array(bytes)
        let result: Result<JSONValue, JSONParseError> = array.withUnsafeBufferPointer { buffer in
            var parser = JSONParser(buffer)
            return Result { () throws(JSONParseError) -> JSONValue in try parser.scanText(JSONBuilder.self) }
        }
        return try result.get()
    }
}

/// The parser's sink: builds ``JSONValue``s.
enum JSONBuilder: JSONSink {
    static var decodesStrings: Bool { true }

    static func literal(_ value: JSONValue) -> JSONValue { value }

    /// A Double when it holds the literal; else the text, which is written back unchanged: an
    /// integer literal of 16 digits or more that is not below the writer's exact range
    /// (±9.0e15: ids, record counters), or any literal beyond a Double's range (`1e999`).
    /// A literal too small for one (`1e-999`) reads as 0, as anywhere else.
    static func number(_ literal: UnsafeBufferPointer<UInt8>) -> JSONValue {
        let value = Double(String(decoding: literal, as: UTF8.self))
        if let value, value.isFinite {
            let isInteger = !literal.contains { $0 == UInt8(ascii: ".") || $0 | 0x20 == UInt8(ascii: "e") }
            if !isInteger || literal.count <= 15 || abs(value) < largestWrittenInteger { return .number(value) }
        }
        return .verbatim(JSONText(checked: Array(literal)))
    }

    /// Integers up to this size are written back as digits (``JSONValue/appendNumber(_:to:)``).
    static let largestWrittenInteger: Double = 9.0e15

    static func string(_ string: String) -> JSONValue { .string(string) }

    static func emptyMembers() -> [String: JSONValue] { [:] }

    /// The last value given for a key wins (documented on ``JSONValue/parse(_:)``).
    static func add(_ key: String, _ value: JSONValue, to members: inout [String: JSONValue]) {
        members[key] = value
    }

    static func object(_ members: [String: JSONValue]) -> JSONValue { .object(members) }

    static func emptyElements() -> [JSONValue] { [] }

    static func append(_ value: JSONValue, to elements: inout [JSONValue]) { elements.append(value) }

    static func array(_ elements: [JSONValue]) -> JSONValue { .array(elements) }
}
