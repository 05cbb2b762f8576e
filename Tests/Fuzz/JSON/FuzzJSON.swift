import Foundation
@testable import JSONRPC

/// libFuzzer entry point: one input is one JSON text, as a request line or an upstream body.
///
/// Checks that the parser (`JSONValue.parse`) and the validator (`JSONText(validating:)`),
/// which share one scanner, accept the same texts; that what the parser builds is written back
/// (`encoded()`) as one line that parses to the same value and writes back byte for byte; that
/// a validated text reads as what the parser built; and that the Codable bridge
/// (JSONEncoder/JSONDecoder) keeps the value.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSON(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = fuzzInput(start, count)
    let parsed = Result { () throws(JSONParseError) in try JSONValue.parse(bytes) }
    let validated = Result { () throws(JSONParseError) in try JSONText(validating: bytes) }
    switch (parsed, validated) {
    case (.success(let value), .success(let text)):
        checkRoundTrip(value)
        checkValidatedText(text, input: bytes, parsed: value)
        checkCodableBridge(value)
    case (.success, .failure(let error)):
        require(false, "the parser accepts a text the validator refuses: \(error)")
    case (.failure(let error), .success):
        require(false, "the validator accepts a text the parser refuses: \(error)")
    case (.failure, .failure):
        break
    }
    return 0
}

/// `encoded()` is what the daemon sends: one line, valid JSON, the same value, stable bytes.
private func checkRoundTrip(_ value: JSONValue) {
    let encoded = value.encoded()
    require(!encoded.contains(0x0A) && !encoded.contains(0x0D), "encoded() holds a raw line break")
    let again: JSONValue
    do {
        again = try JSONValue.parse(encoded)
    } catch {
        require(false, "encoded() is not JSON: \(error) in \(String(decoding: encoded, as: UTF8.self))")
        return
    }
    require(again == value, "encoded() parses to another value: \(String(decoding: encoded, as: UTF8.self))")
    require(again.encoded() == encoded, "encoding is not stable: \(String(decoding: encoded, as: UTF8.self))")
    let text = try? JSONText(validating: encoded)
    require(text?.bytes == encoded, "the validator refuses or changes encoded() output")
}

/// A validated text is the input with its line breaks (white space only) turned into spaces,
/// and reads as the parser's value.
private func checkValidatedText(_ text: JSONText, input: [UInt8], parsed: JSONValue) {
    require(text.bytes.count == input.count, "the validated text changed length")
    for (original, kept) in zip(input, text.bytes) where original != kept {
        require((original == 0x0A || original == 0x0D) && kept == 0x20, "the validated text changed a byte other than a line break")
    }
    require(text.value == parsed, "JSONText.value differs from the parsed value")
}

/// JSONValue's Codable conformance, used when a Codable type holds a JSON value: encoding and
/// decoding through Foundation must keep the value (numbers as numbers, not digit for digit).
private func checkCodableBridge(_ value: JSONValue) {
    let depth = nesting(value)
    do {
        let viaEncoder = try JSONValue(encoding: value)
        require(sameJSON(viaEncoder, value), "JSONEncoder changes the value to \(viaEncoder)")
    } catch {
        if depth >= JSONValue.maximumDepth {
            // Known: JSONEncoder stops one level short of what the parser accepts.
            noteKnownFinding("JSONEncoder refuses the 512 levels of nesting that JSONValue.parse accepts")
        } else {
            require(holdsNumberBeyondDouble(value), "JSONEncoder refuses a value: \(error)")
        }
    }
    // Decoding into JSONValue costs far more than linear time in the depth (0.8 s at 511
    // levels, docs/FUZZING.md): deeper values would only slow the run down.
    guard depth <= 64 else { return }
    do {
        let viaDecoder = try value.decode(as: JSONValue.self)
        require(sameJSON(viaDecoder, value), "JSONDecoder changes the value to \(viaDecoder)")
    } catch {
        require(holdsNumberBeyondDouble(value), "JSONDecoder refuses encoded() output: \(error)")
    }
}

/// Equal, except that a number kept as text may come back as the nearest Double.
private func sameJSON(_ a: JSONValue, _ b: JSONValue) -> Bool {
    switch (a, b) {
    case (.verbatim(let x), .verbatim(let y)):
        return x == y || (double(of: x) != nil && double(of: x) == double(of: y))
    case (.verbatim(let text), .number(let number)), (.number(let number), .verbatim(let text)):
        return double(of: text) == number
    case (.array(let x), .array(let y)):
        return x.count == y.count && zip(x, y).allSatisfy(sameJSON)
    case (.object(let x), .object(let y)):
        return x.count == y.count && x.allSatisfy { key, value in y[key].map { sameJSON(value, $0) } ?? false }
    default:
        return a == b
    }
}

private func double(of text: JSONText) -> Double? {
    Double(String(decoding: text.bytes, as: UTF8.self)).flatMap { $0.isFinite ? $0 : nil }
}

/// How many arrays and objects deep the value goes.
private func nesting(_ value: JSONValue) -> Int {
    switch value {
    case .array(let elements): 1 + (elements.map(nesting).max() ?? 0)
    case .object(let fields): 1 + (fields.values.map(nesting).max() ?? 0)
    default: 0
    }
}

/// Foundation reads and writes numbers as Double: one beyond its range cannot pass through.
private func holdsNumberBeyondDouble(_ value: JSONValue) -> Bool {
    switch value {
    case .verbatim(let text): double(of: text) == nil
    case .array(let elements): elements.contains(where: holdsNumberBeyondDouble)
    case .object(let fields): fields.values.contains(where: holdsNumberBeyondDouble)
    default: false
    }
}
