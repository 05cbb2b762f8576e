import Foundation
import ATSyntax
import Testing

/// Reads the official atproto interop vectors bundled under `Fixtures/`.
enum SyntaxVectors {
    /// The non-comment lines of `name`, exactly as written (spaces are significant: some
    /// invalid vectors differ from valid ones only by a leading or trailing space).
    static func lines(_ name: String) throws -> [String] {
        let directory = try #require(Bundle.module.url(forResource: "Fixtures", withExtension: nil))
        let text = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
        return text.split(separator: "\n", omittingEmptySubsequences: false)
            .map(String.init)
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
    }

    /// Lines for which `accepts` disagrees with `expected`, for one clear failure message.
    static func mismatches(in name: String, expected: Bool, _ accepts: (String) -> Bool) throws -> [String] {
        let lines = try lines(name)
        #expect(!lines.isEmpty, "no vectors read from \(name)")
        return lines.filter { accepts($0) != expected }
    }
}

@Suite("atproto syntax: official interop vectors")
struct SyntaxVectorTests {
    @Test func validHandlesAreAccepted() throws {
        let failed = try SyntaxVectors.mismatches(in: "handle_syntax_valid.txt", expected: true) { Handle($0) != nil }
        #expect(failed.isEmpty, "rejected valid handles: \(failed.map(String.init(reflecting:)))")
    }

    @Test func invalidHandlesAreRejected() throws {
        let failed = try SyntaxVectors.mismatches(in: "handle_syntax_invalid.txt", expected: false) { Handle($0) != nil }
        #expect(failed.isEmpty, "accepted invalid handles: \(failed.map(String.init(reflecting:)))")
    }

    @Test func validDIDsAreAccepted() throws {
        let failed = try SyntaxVectors.mismatches(in: "did_syntax_valid.txt", expected: true) { DID($0) != nil }
        #expect(failed.isEmpty, "rejected valid DIDs: \(failed.map(String.init(reflecting:)))")
    }

    @Test func invalidDIDsAreRejected() throws {
        let failed = try SyntaxVectors.mismatches(in: "did_syntax_invalid.txt", expected: false) { DID($0) != nil }
        #expect(failed.isEmpty, "accepted invalid DIDs: \(failed.map(String.init(reflecting:)))")
    }

    @Test func validNSIDsAreAccepted() throws {
        let failed = try SyntaxVectors.mismatches(in: "nsid_syntax_valid.txt", expected: true) { NSID($0) != nil }
        #expect(failed.isEmpty, "rejected valid NSIDs: \(failed.map(String.init(reflecting:)))")
    }

    @Test func invalidNSIDsAreRejected() throws {
        let failed = try SyntaxVectors.mismatches(in: "nsid_syntax_invalid.txt", expected: false) { NSID($0) != nil }
        #expect(failed.isEmpty, "accepted invalid NSIDs: \(failed.map(String.init(reflecting:)))")
    }
}
