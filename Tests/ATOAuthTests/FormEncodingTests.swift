import ATOAuth
import Testing

@Suite("application/x-www-form-urlencoded")
struct FormEncodingTests {
    @Test("reserved characters are percent-encoded, spaces become +, a plus sign %2B")
    func encoding() {
        #expect(FormEncoding.encode("atproto transition:generic") == "atproto+transition%3Ageneric")
        #expect(FormEncoding.encode("a+b&c=d/é~._-") == "a%2Bb%26c%3Dd%2F%C3%A9~._-")
        #expect(FormEncoding.percentEncode("a b", spaceAsPlus: false) == "a%20b")
        let body = FormBody([("grant_type", "refresh_token"), ("refresh_token", "ref+tok/en=")])
        #expect(body.encoded == "grant_type=refresh_token&refresh_token=ref%2Btok%2Fen%3D")
    }

    @Test("decoding reads + and %20 as a space and %2B as a plus sign")
    func decoding() throws {
        let fields = try #require(FormEncoding.decode("a=x+y&b=x%20y&c=x%2By&d=&e"))
        #expect(fields.map(\.name) == ["a", "b", "c", "d", "e"])
        #expect(fields.map(\.value) == ["x y", "x y", "x+y", "", ""])
    }

    @Test("broken percent escapes and invalid UTF-8 are refused")
    func invalid() {
        for text in ["a=%", "a=%4", "a=%zz", "a=%FF", "%C3=1"] {
            #expect(FormEncoding.decode(text) == nil, "\(text) should be refused")
        }
    }

    @Test("any text survives encoding then decoding")
    func roundTrip() throws {
        let values = ["", " ", "+", "%", "%25", "a b+c", "did:plc:abc", "http://127.0.0.1:8080/callback?x=1&y=2", "日本語 ✓"]
        let body = FormBody(values.enumerated().map { ("k\($0.offset)", $0.element) })
        let decoded = try #require(FormEncoding.decode(body.encoded))
        #expect(decoded.map(\.value) == values)
    }

    @Test("a body prints its field names, not its values")
    func redacted() {
        let body = FormBody([("code", "secret-code"), ("code_verifier", "secret-verifier")])
        #expect("\(body)" == "FormBody(code, code_verifier)")
    }
}
