import Foundation
import JSONRPC
import Testing

@Suite("JSON text passed through verbatim")
struct JSONTextTests {
    @Test("a valid text is kept byte for byte: key order, every digit, escapes", arguments: [
        #"{"z":1,"a":12345678901234567890123,"m":[0.1000000000000000055511151231257827,-0e+0]}"#,
        #"{"s":"quote \" é 😀 \ud83d\ude00 \/ \u0001"}"#, #"[]"#, #""x""#, #"null"#, #"1e999"#,
    ])
    func keptExactly(text: String) throws {
        let kept = try JSONText(validating: Array(text.utf8))
        #expect(kept.bytes == Array(text.utf8))
        let line = JSONValue.object(["body": .verbatim(kept)]).encoded()
        #expect(line == Array(#"{"body":\#(text)}"#.utf8))
    }

    @Test("line breaks between tokens become spaces, so the text still fits on one line")
    func oneLine() throws {
        let kept = try JSONText(validating: Array("{\r\n  \"a\": [1,\n 2]\n}\n".utf8))
        #expect(!kept.bytes.contains(0x0A) && !kept.bytes.contains(0x0D))
        #expect(kept.value == .object(["a": [1, 2]]))
    }

    @Test("whatever the parser refuses, the validator refuses", arguments: [
        "", "{", "[1,]", "{\"a\" 1}", "{\"a\":1,}", "01", "1.", "-", "tru", "\"unterminated",
        "\"bad \\x escape\"", "\"\\ud800 alone\"", "\"ctl \u{1} raw\"", "1 2", "{'a':1}", "NaN", "{\"a\":1}}",
    ])
    func refused(text: String) {
        #expect(throws: JSONParseError.self) { try JSONText(validating: Array(text.utf8)) }
    }

    @Test("invalid UTF-8 and hostile nesting are refused")
    func hostile() {
        #expect(throws: JSONParseError.self) { try JSONText(validating: [0x22, 0xFF, 0xFE, 0x22]) }
        #expect(throws: JSONParseError.self) { try JSONText(validating: [0x22, 0xC3, 0x22]) }
        #expect(throws: JSONParseError.self) {
            try JSONText(validating: Array(repeating: UInt8(ascii: "["), count: 100_000))
        }
    }

    @Test("encoding a verbatim value through Codable gives the same JSON")
    func codable() throws {
        let kept = try JSONText(validating: Array(#"{"b":[true,null],"a":"x"}"#.utf8))
        let data = try JSONEncoder().encode(JSONValue.verbatim(kept))
        #expect(try JSONValue.parse(Array(data)) == kept.value)
    }
}
