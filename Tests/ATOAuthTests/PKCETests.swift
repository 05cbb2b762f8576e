import ATOAuth
import Crypto
import Foundation
import Testing

@Suite("PKCE and state")
struct PKCETests {
    @Test("RFC 7636 Appendix B: the verifier's S256 challenge")
    func rfcExample() throws {
        let pkce = try PKCE(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        #expect(pkce.challenge == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        #expect(PKCE.method == "S256")
    }

    @Test("generated verifiers are 43 unreserved characters, unique, with a matching challenge")
    func generated() {
        let unreserved = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        var seen = Set<String>()
        for _ in 0..<100 {
            let pkce = PKCE.generate()
            #expect(pkce.verifier.count == 43)
            #expect(pkce.verifier.allSatisfy(unreserved.contains))
            #expect(seen.insert(pkce.verifier).inserted)
            let digest = Data(SHA256.hash(data: Data(pkce.verifier.utf8))).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            #expect(pkce.challenge == digest)
        }
    }

    @Test("stored verifiers breaking RFC 7636 §4.1 are refused")
    func invalidVerifiers() {
        #expect(throws: PKCEError.invalidVerifierLength(42)) { try PKCE(verifier: String(repeating: "a", count: 42)) }
        #expect(throws: PKCEError.invalidVerifierLength(129)) { try PKCE(verifier: String(repeating: "a", count: 129)) }
        #expect(throws: PKCEError.invalidVerifierCharacters) { try PKCE(verifier: String(repeating: "a", count: 42) + "+") }
        #expect(throws: Never.self) { try PKCE(verifier: String(repeating: "~", count: 128)) }
    }

    @Test("printing PKCE hides the verifier")
    func redacted() {
        let pkce = PKCE.generate()
        #expect(!"\(pkce)".contains(pkce.verifier))
        #expect(!String(reflecting: pkce).contains(pkce.verifier))
    }

    @Test("states are 43 base64url characters and do not repeat")
    func states() {
        let states = (0..<100).map { _ in SecureRandom.state() }
        #expect(Set(states).count == 100)
        #expect(states.allSatisfy { $0.count == 43 && !$0.contains("=") && !$0.contains("+") && !$0.contains("/") })
    }
}
