import Foundation
import JSONRPC
import Testing

/// The rules the parser and the validator share (docs/JSON.md): numbers of any size, repeated
/// keys, the depth limit.
@Suite("One JSON grammar for parsing and validation")
struct JSONGrammarTests {
    private func parse(_ text: String) throws -> JSONValue { try JSONValue.parse(Array(text.utf8)) }
    private func validate(_ text: String) throws -> JSONText { try JSONText(validating: Array(text.utf8)) }

    @Test("a number beyond a Double's range is accepted by both and kept as written",
          arguments: ["1e999", "-1e999", "[-1.5e400]", "1E+400", "0.4e006699999999999999999999999999"])
    func numberBeyondDouble(text: String) throws {
        let value = try parse(text)
        let kept = try validate(text)
        #expect(kept.value == value)
        #expect(value.encoded() == Array(text.utf8), "written back unchanged")
        let number = value.arrayValue?.first ?? value
        guard case .verbatim(let literal) = number else {
            Issue.record("\(text) is \(number), not verbatim text")
            return
        }
        #expect(literal.integerLiteral == nil)
        #expect(number.doubleValue == nil, "no Double holds it")
    }

    @Test("1e999 inside a request survives a round trip through a reply line")
    func numberBeyondDoubleInObject() throws {
        let body = try validate(#"{"n":1e999,"m":[1e-999]}"#)
        let line = JSONValue.object(["result": .verbatim(body)]).encoded()
        let reply = try JSONValue.parse(line)
        #expect(reply["result"]?["n"]?.encoded() == Array("1e999".utf8))
        #expect(reply["result"]?["m"] == JSONValue.array([0]), "too small for a Double reads as 0")
    }

    @Test("Codable cannot hold 1e999: JSONEncoder refuses it instead of recursing")
    func numberBeyondDoubleCodable() throws {
        let value = try parse("[1e999]")
        #expect(throws: EncodingError.self) { try JSONEncoder().encode(value) }
        #expect(try JSONValue(encoding: try parse("[1.5e300]")) == [1.5e300])
    }

    @Test("a key given twice: both accept, the last value wins")
    func duplicateKeys() throws {
        let text = #"{"a":1,"b":{"c":"first","c":"second"},"a":2}"#
        let value = try parse(text)
        #expect(value == ["a": 2, "b": ["c": "second"]])
        let kept = try validate(text)
        #expect(kept.bytes == Array(text.utf8), "the validated text keeps both, as written")
        #expect(kept.value == value)
    }

    @Test("the depth limit is the same for both: 512 levels pass, 513 do not")
    func depthLimit() throws {
        for depth in [JSONValue.maximumDepth, JSONValue.maximumDepth + 1] {
            for (open, close) in [("[", "]"), (#"{"k":"#, "}")] {
                let text = String(repeating: open, count: depth) + "0" + String(repeating: close, count: depth)
                let parsed = (try? parse(text)) != nil
                let validated = (try? validate(text)) != nil
                #expect(parsed == validated)
                #expect(parsed == (depth <= JSONValue.maximumDepth), "\(depth) levels of \(open)")
            }
        }
    }

    @Test("strings: the same checks whether decoded or only validated", arguments: [
        (#""plain""#, true), (#""é \u00e9 \ud83d\ude00""#, true), (#""\u0000""#, true),
        (#""\ud800""#, false), (#""\udc00\ud800""#, false), (#""\uD834\u0041""#, false),
        (#""a\"#, false), (#""\u12""#, false), (#""\q""#, false),
    ])
    func strings(text: String, valid: Bool) {
        #expect(((try? parse(text)) != nil) == valid)
        #expect(((try? validate(text)) != nil) == valid)
    }

    @Test("invalid UTF-8 next to an escape is refused by both")
    func utf8AroundEscapes() {
        for bytes: [UInt8] in [[0x22, 0xC3, 0x5C, 0x6E, 0x22], [0x22, 0x5C, 0x6E, 0xA9, 0x22], [0x22, 0x5C, 0x6E, 0xC3, 0xA9, 0x22]] {
            let valid = bytes.count == 6
            #expect(((try? JSONValue.parse(bytes)) != nil) == valid)
            #expect(((try? JSONText(validating: bytes)) != nil) == valid)
        }
    }
}
