import Foundation
import JSONRPC
import Testing

@Suite("JSON parsing and encoding")
struct JSONValueCodingTests {
    @Test("values survive a round trip, and agree with Foundation's parser", arguments: [
        #"{"a":[1,2.5,-3e2,true,false,null],"b":{"c":"d"},"e":""}"#,
        #"[]"#, #"{}"#, #""x""#, #"0"#, #"-0.125"#, #"1e-7"#, #"12345678901234"#,
        #"{"s":"quote \" backslash \\ slash \/ nl \n tab \t ctl \u0001 é 😀 \ud83d\ude00"}"#,
        "  {\"spaced\" :\n [ 1 , 2 ] }\r\n",
    ])
    func roundTrip(text: String) throws {
        let value = try JSONValue.parse(Array(text.utf8))
        let again = try JSONValue.parse(value.encoded())
        #expect(again == value)
        let foundation = try JSONSerialization.jsonObject(with: Data(value.encoded()), options: .fragmentsAllowed)
        let reparsed = try JSONValue.parse(Array(try JSONSerialization.data(withJSONObject: foundation, options: .fragmentsAllowed)))
        #expect(reparsed == value, "Foundation reads our encoding the same way")
        #expect(!value.encoded().contains(0x0A), "an encoding never holds a raw newline")
    }

    @Test("escapes decode to the right characters")
    func escapes() throws {
        #expect(try JSONValue.parse(Array(#""a\u00e9\ud83d\ude00\n""#.utf8)) == .string("aé😀\n"))
        #expect(JSONValue.string("a\"b\\c\u{1}").encoded() == Array(#""a\"b\\c\u0001""#.utf8))
        #expect(JSONValue.object(["b": 1, "a": 2]).encoded() == Array(#"{"a":2,"b":1}"#.utf8), "keys are sorted")
    }

    @Test("malformed JSON is refused with where it went wrong", arguments: [
        "", "{", "[1,]", "{\"a\" 1}", "{\"a\":1,}", "01", "1.", "-", "tru", "\"unterminated",
        "\"bad \\x escape\"", "\"\\ud800 alone\"", "\"ctl \u{1} raw\"", "1 2", "{'a':1}", "NaN",
    ])
    func malformed(text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(Array(text.utf8)) }
    }

    @Test("invalid UTF-8 and hostile nesting are refused, not crashed on")
    func hostileInput() {
        #expect(throws: JSONParseError.self) { try JSONValue.parse([0x22, 0xFF, 0xFE, 0x22]) }
        let deep = Array(repeating: UInt8(ascii: "["), count: 100_000)
        #expect(throws: JSONParseError.self) { try JSONValue.parse(deep) }
        let fine = Array(repeating: UInt8(ascii: "["), count: 500) + Array(repeating: UInt8(ascii: "]"), count: 500)
        #expect((try? JSONValue.parse(fine)) != nil)
    }

    @Test("integers a Double cannot hold are kept as written; others parse as numbers")
    func largeIntegers() throws {
        let huge = String(repeating: "9", count: 400)
        let text = #"{"big":123456789012345678901234567890,"edge":9007199254740993,"small":8999999999999999,"neg":-12345678901234567890,"frac":1.5e300,"gap":9005000000000001,"huge":"# + huge + "}"
        let value = try JSONValue.parse(Array(text.utf8))
        #expect(value["small"] == .number(8_999_999_999_999_999))
        #expect(value["frac"]?.doubleValue == 1.5e300)
        guard case .verbatim(let big) = value["big"] else {
            Issue.record("a 30-digit integer stays verbatim")
            return
        }
        #expect(big.integerLiteral == "123456789012345678901234567890")
        let written = String(decoding: value.encoded(), as: UTF8.self)
        for literal in ["123456789012345678901234567890", "9007199254740993", "-12345678901234567890", "9005000000000001", huge] {
            #expect(written.contains(literal), "\(written)")
        }
        #expect(RPCID(json: value["edge"]!) == .largeInteger("9007199254740993"))
        #expect(RPCID(json: value["small"]!) == .number(8_999_999_999_999_999))
        #expect(RPCID(json: value["gap"]!) == .largeInteger("9005000000000001"), "between the writer's range and 2^53")
        // Beyond a Double's range with a fraction too: kept as written (JSONGrammarTests).
        let beyond = "1" + String(repeating: "0", count: 400) + ".5"
        #expect(try JSONValue.parse(Array(beyond.utf8)) == .verbatim(try JSONText(validating: Array(beyond.utf8))))
    }
}
