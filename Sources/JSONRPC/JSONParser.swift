/// What the scanner makes of the pieces of a JSON text it reads.
///
/// The grammar lives once, in ``JSONParser``; a sink only builds values from what it is handed
/// (``JSONBuilder``) or drops it (``JSONSkipper``). So the validator cannot accept a text that
/// the parser refuses, or the other way round: no rule (depth, numbers, strings, duplicate
/// keys) can be checked by one and not the other.
protocol JSONSink {
    associatedtype Value
    associatedtype Members
    associatedtype Elements
    /// Whether strings are decoded; they are checked the same either way.
    static var decodesStrings: Bool { get }
    /// `null`, `true` or `false`.
    static func literal(_ value: JSONValue) -> Value
    /// A number literal, already checked against the grammar (any magnitude).
    static func number(_ literal: UnsafeBufferPointer<UInt8>) -> Value
    static func string(_ string: String) -> Value
    static func emptyMembers() -> Members
    /// One member of an object, in the order written; a key may come again.
    static func add(_ key: String, _ value: Value, to members: inout Members)
    static func object(_ members: Members) -> Value
    static func emptyElements() -> Elements
    static func append(_ value: Value, to elements: inout Elements)
    static func array(_ elements: Elements) -> Value
}

/// A recursive-descent scanner for RFC 8259 JSON in UTF-8, shared by ``JSONValue/parse(_:)``
/// and ``JSONText/init(validating:)``.
///
/// Generic over the sink so that each use is specialised: validating allocates nothing per
/// value, parsing pays for nothing it does not build.
struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    var position = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    func error(_ reason: String) -> JSONParseError { JSONParseError(reason: reason, offset: position) }

    mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x0A, 0x0D, 0x09: position += 1
            default: return
            }
        }
    }

    /// One whole text: a value, white space around it, nothing else.
    mutating func scanText<Sink: JSONSink>(_ sink: Sink.Type) throws(JSONParseError) -> Sink.Value {
        let value = try scanValue(sink, depth: 0)
        skipWhitespace()
        guard position == bytes.count else { throw error("unexpected data after the JSON value") }
        return value
    }

    /// One value (after white space), `depth` containers deep.
    mutating func scanValue<Sink: JSONSink>(_ sink: Sink.Type, depth: Int) throws(JSONParseError) -> Sink.Value {
        skipWhitespace()
        guard position < bytes.count else { throw error("unexpected end of input") }
        switch bytes[position] {
        case UInt8(ascii: "{"): return try scanObject(sink, depth: depth + 1)
        case UInt8(ascii: "["): return try scanArray(sink, depth: depth + 1)
        case UInt8(ascii: "\""): return Sink.string(try scanString(decoding: Sink.decodesStrings))
        case UInt8(ascii: "t"): try expectLiteral("true"); return Sink.literal(.bool(true))
        case UInt8(ascii: "f"): try expectLiteral("false"); return Sink.literal(.bool(false))
        case UInt8(ascii: "n"): try expectLiteral("null"); return Sink.literal(.null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            let start = position
            try scanNumber()
            return Sink.number(UnsafeBufferPointer(rebasing: bytes[start..<position]))
        default: throw error("unexpected character")
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        guard position + count <= bytes.count else { throw error("unexpected end of input") }
        for index in 0..<count where bytes[position + index] != literal.utf8Start[index] {
            throw error("invalid literal")
        }
        position += count
    }

    /// Checked on entering a container, so hostile input cannot exhaust the stack.
    func checkDepth(_ depth: Int) throws(JSONParseError) {
        guard depth <= JSONValue.maximumDepth else { throw error("nesting deeper than \(JSONValue.maximumDepth)") }
    }

    mutating func scanObject<Sink: JSONSink>(_ sink: Sink.Type, depth: Int) throws(JSONParseError) -> Sink.Value {
        var members = Sink.emptyMembers()
        guard try enterContainer(closing: UInt8(ascii: "}"), depth: depth) else { return Sink.object(members) }
        repeat {
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { throw error("expected a string key") }
            let key = try scanString(decoding: Sink.decodesStrings)
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else { throw error("expected ':'") }
            position += 1
            Sink.add(key, try scanValue(sink, depth: depth), to: &members)
        } while try continuesContainer(closing: UInt8(ascii: "}"))
        return Sink.object(members)
    }

    mutating func scanArray<Sink: JSONSink>(_ sink: Sink.Type, depth: Int) throws(JSONParseError) -> Sink.Value {
        var elements = Sink.emptyElements()
        guard try enterContainer(closing: UInt8(ascii: "]"), depth: depth) else { return Sink.array(elements) }
        repeat {
            Sink.append(try scanValue(sink, depth: depth), to: &elements)
        } while try continuesContainer(closing: UInt8(ascii: "]"))
        return Sink.array(elements)
    }

    /// Steps into a container at its opening bracket; false (and past `closing`) when it is empty.
    private mutating func enterContainer(closing: UInt8, depth: Int) throws(JSONParseError) -> Bool {
        try checkDepth(depth)
        position += 1
        skipWhitespace()
        guard position < bytes.count, bytes[position] == closing else { return true }
        position += 1
        return false
    }

    /// After a member or element: true past a ',', false past `closing`.
    private mutating func continuesContainer(closing: UInt8) throws(JSONParseError) -> Bool {
        skipWhitespace()
        guard position < bytes.count else { throw error("unexpected end of input") }
        switch bytes[position] {
        case UInt8(ascii: ","): position += 1; return true
        case closing: position += 1; return false
        default: throw error("expected ',' or '\(Character(Unicode.Scalar(closing)))'")
        }
    }

    /// Moves past one number, checking its grammar only: a number's magnitude is the sink's
    /// business (``JSONBuilder`` keeps one beyond a Double as text), never a reason to refuse.
    mutating func scanNumber() throws(JSONParseError) {
        if bytes[position] == UInt8(ascii: "-") { position += 1 }
        guard position < bytes.count else { throw error("invalid number") }
        if bytes[position] == UInt8(ascii: "0") {
            position += 1
        } else {
            guard skipDigits() > 0 else { throw error("invalid number") }
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            position += 1
            guard skipDigits() > 0 else { throw error("invalid number") }
        }
        if position < bytes.count, bytes[position] | 0x20 == UInt8(ascii: "e") {
            position += 1
            if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") {
                position += 1
            }
            guard skipDigits() > 0 else { throw error("invalid number") }
        }
    }

    mutating func skipDigits() -> Int {
        let start = position
        while position < bytes.count, bytes[position] >= UInt8(ascii: "0"), bytes[position] <= UInt8(ascii: "9") {
            position += 1
        }
        return position - start
    }
}
