import Foundation
import JSONRPC
import Testing

/// nst/JSONTestSuite's parsing corpus (Fixtures/JSONTestSuite, MIT), read by the parser and
/// the validator: they share one grammar, so they must give every file the same verdict.
@Suite("JSONTestSuite corpus")
struct JSONTestSuiteTests {
    /// The `i_` (implementation-defined) files both accept; every other `i_` file is refused.
    /// docs/JSON.md gives the reasons; a change here is a change of the documented grammar.
    static let acceptedImplementationDefined: Set<String> = [
        "i_number_double_huge_neg_exp.json", "i_number_huge_exp.json", "i_number_neg_int_huge_exp.json",
        "i_number_pos_double_huge_exp.json", "i_number_real_neg_overflow.json", "i_number_real_pos_overflow.json",
        "i_number_real_underflow.json", "i_number_too_big_neg_int.json", "i_number_too_big_pos_int.json",
        "i_number_very_big_negative_int.json", "i_structure_500_nested_arrays.json",
    ]


    static let directory: URL? = Bundle.module.resourceURL?
        .appendingPathComponent("Fixtures/JSONTestSuite/test_parsing", isDirectory: true)

    static let files: [String] = {
        guard let directory else { return [] }
        return ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
            .filter { $0.hasSuffix(".json") }.sorted()
    }()

    @Test("the corpus is all there: 95 y_, 188 n_, 35 i_ files")
    func corpusPresent() {
        #expect(Self.files.filter { $0.hasPrefix("y_") }.count == 95)
        #expect(Self.files.filter { $0.hasPrefix("n_") }.count == 188)
        #expect(Self.files.filter { $0.hasPrefix("i_") }.count == 35)
    }

    @Test("y_ accepted, n_ refused, i_ as documented, by the parser and the validator alike",
          arguments: JSONTestSuiteTests.files)
    func verdict(file: String) throws {
        let directory = try #require(Self.directory)
        let bytes = try [UInt8](Data(contentsOf: directory.appendingPathComponent(file)))
        let parsed = Result { () throws(JSONParseError) in try JSONValue.parse(bytes) }
        let validated = Result { () throws(JSONParseError) in try JSONText(validating: bytes) }
        let parserAccepts = (try? parsed.get()) != nil
        let validatorAccepts = (try? validated.get()) != nil
        #expect(parserAccepts == validatorAccepts, "parser: \(parsed), validator: \(validated)")

        let expected: Bool
        switch file.prefix(2) {
        case "y_": expected = true
        case "n_": expected = false
        default: expected = Self.acceptedImplementationDefined.contains(file)
        }
        #expect(parserAccepts == expected, "parser: \(parsed)")

        // What both accept, the validated text reads as the parsed value.
        if case .success(let value) = parsed, case .success(let text) = validated {
            #expect(text.value == value)
        }
    }
}
