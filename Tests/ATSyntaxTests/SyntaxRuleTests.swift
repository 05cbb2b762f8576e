import ATSyntax
import Foundation
import Testing

@Suite("atproto syntax: targeted rules")
struct SyntaxRuleTests {
    @Test func handlesAreLowercased() throws {
        let handle = try Handle(validating: "Alice.Bsky.Social")
        #expect(handle.description == "alice.bsky.social")
        #expect(handle == Handle("alice.bsky.social"))
    }

    @Test func handleLengthLimits() {
        let label63 = String(repeating: "a", count: 63)
        #expect(Handle("\(label63).test") != nil)
        #expect(Handle("a\(label63).test") == nil)
        // 4 labels of 63 plus 3 dots = 255 characters: over the 253 limit.
        let tooLong = Array(repeating: label63, count: 4).joined(separator: ".")
        #expect(Handle(tooLong) == nil)
        let longest = Array(repeating: label63, count: 3).joined(separator: ".") + ".abcdefghijklmnopqrstuvwxyz"
        #expect(longest.count == 218)
        #expect(Handle(longest) != nil)
    }

    @Test func errorsNameTheBrokenRule() {
        #expect(throws: SyntaxError.self) { try Handle(validating: "john..test") }
        do {
            _ = try Handle(validating: "john.0")
            Issue.record("john.0 was accepted")
        } catch {
            #expect(error.description.contains("(top-level domain) must start with a letter"))
            #expect(error.description.contains("john.0"))
        }
        do {
            _ = try DID(validating: "did:METHOD:val")
            Issue.record("uppercase method was accepted")
        } catch {
            #expect(error.description == "invalid DID \"did:METHOD:val\": the method must be lowercase letters a-z only")
        }
    }

    @Test func didAccessors() throws {
        let plc = try DID(validating: "did:plc:7iza6de2dwap2sbkpav7c6c6")
        #expect(plc.method == .plc)
        #expect(plc.identifier == "7iza6de2dwap2sbkpav7c6c6")
        let web = try DID(validating: "did:web:localhost%3A8443")
        #expect(web.method == .web)
        #expect(web.identifier == "localhost%3A8443")
        #expect(try DID(validating: "did:key:zQ3sh").method == .other("key"))
        // DIDs are case sensitive: no normalisation.
        #expect(DID("did:method:VAL")?.description == "did:method:VAL")
    }

    @Test func didLengthLimit() {
        let prefix = "did:plc:"
        #expect(DID(prefix + String(repeating: "a", count: DID.maxLength - prefix.count)) != nil)
        #expect(DID(prefix + String(repeating: "a", count: DID.maxLength - prefix.count + 1)) == nil)
    }

    @Test func nsidAccessors() throws {
        let nsid = try NSID(validating: "com.atproto.server.createSession")
        #expect(nsid.authority == "server.atproto.com")
        #expect(nsid.name == "createSession")
        #expect(NSID("com.example.name-with-hyphen") == nil)
    }

    @Test func identifierParsing() throws {
        #expect(try ATIdentifier(parsing: "did:plc:abc") == .did(DID("did:plc:abc")!))
        #expect(try ATIdentifier(parsing: "@Alice.Test") == .handle(Handle("alice.test")!))
        #expect(throws: SyntaxError.self) { try ATIdentifier(parsing: "alice") }
        #expect(throws: SyntaxError.self) { try ATIdentifier(parsing: "did:plc:") }
    }

    @Test func codableRoundTripAndValidation() throws {
        struct Account: Codable, Equatable { var did: DID; var handle: Handle; var method: NSID }
        let account = Account(did: DID("did:plc:abc")!, handle: Handle("alice.test")!, method: NSID("com.example.foo")!)
        let data = try JSONEncoder().encode(account)
        #expect(try JSONDecoder().decode(Account.self, from: data) == account)
        let bad = Data(#"{"did":"did:PLC:x","handle":"alice.test","method":"com.example.foo"}"#.utf8)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(Account.self, from: bad) }
    }
}
