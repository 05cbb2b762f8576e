import Foundation
import Testing
import WebBasics

@Suite("base64url without padding")
struct Base64URLTests {
    @Test("RFC 4648 §10 vectors, without padding")
    func vectors() {
        let vectors = ["": "", "f": "Zg", "fo": "Zm8", "foo": "Zm9v", "foob": "Zm9vYg", "fooba": "Zm9vYmE", "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors {
            #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
            #expect(Base64URL.decode(encoded) == Array(plain.utf8))
        }
    }

    @Test("uses - and _ where base64 uses + and /, and agrees with Foundation on random bytes")
    func urlAlphabet() {
        #expect(Base64URL.encode([0xFB, 0xFF, 0xBF]) == "-_-_")
        var generator = SystemRandomNumberGenerator()
        for length in 0..<70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let encoded = Base64URL.encode(bytes)
            // Foundation's encoder, translated: an implementation other than the one under test.
            let independent = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            #expect(encoded == independent)
            #expect(Base64URL.decode(encoded) == bytes)
        }
    }

    @Test("refuses padding, other alphabets, impossible lengths and non-zero trailing bits")
    func strictDecoding() {
        for text in ["Zg==", "Zm9v+", "Zm9v/", "Zm9v Yg", "Z", "Zm9vY", "Zh", "Zm9"] {
            #expect(Base64URL.decode(text) == nil, "\(text) should not decode")
        }
    }

    @Test("the lenient decoder also reads padding, plain base64's + and / and non-zero trailing bits")
    func lenientDecoding() {
        #expect(Base64URL.decodeLeniently("Zg==") == Array("f".utf8))
        #expect(Base64URL.decodeLeniently("Zm8=") == Array("fo".utf8))
        #expect(Base64URL.decodeLeniently("-_-_") == [0xFB, 0xFF, 0xBF])
        #expect(Base64URL.decodeLeniently("+/+/") == [0xFB, 0xFF, 0xBF])
        #expect(Base64URL.decodeLeniently("Zh") == Array("f".utf8))
        for text in ["Z", "Zm9v Yg", "Zg===", "Z=g", "Zm9v*"] {
            #expect(Base64URL.decodeLeniently(text) == nil, "\(text) should not decode")
        }
    }
}
