import Foundation
import JSONRPC
import Testing

/// docs/PROTOCOL.md's "Errors" tables and the catalogue say the same: the same names, each
/// with its code and `data` fields.
@Suite("The error catalogue and docs/PROTOCOL.md")
struct ErrorCatalogueDocsTests {
    /// One row of an Errors table; `code` and `data` are nil in the OAuth table, which has
    /// neither column (all its names are -32010 without data fields).
    struct Row {
        var name: String
        var code: Int?
        var data: [String]?
    }

    /// The rows of every table in the Errors section, read relative to this file: the package
    /// root is two levels up from Tests/JSONRPCTests.
    static func documentedRows() throws -> [Row] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("docs/PROTOCOL.md"), encoding: .utf8)
        let section = try #require(text.components(separatedBy: "\n## Errors\n").dropFirst().first)
            .components(separatedBy: "\n## ")[0]
        return section.split(separator: "\n").compactMap { line -> Row? in
            guard line.hasPrefix("|") else { return nil }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces) }
            switch cells.count {
            case 4:
                guard let code = Int(cells[0]) else { return nil }  // the header and its rule
                let data = cells[2].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                    .map { $0.replacingOccurrences(of: "`", with: "") }
                return Row(name: cells[1], code: code, data: data)
            case 2:
                guard cells[0] != "data.name", !cells[0].hasPrefix("-") else { return nil }
                return Row(name: cells[0], code: nil, data: nil)
            default:
                return nil
            }
        }.filter { !$0.name.hasSuffix("…") }  // the "OAuth…" row stands for the table below it
    }

    @Test("every name in the catalogue is documented, with its code and data fields (`?`: sent only when known)",
          arguments: DaemonErrorName.allCases)
    func documented(name: DaemonErrorName) throws {
        let rows = try Self.documentedRows().filter { $0.name == name.rawValue }
        let row = try #require(rows.count == 1 ? rows.first : nil, "\(name.rawValue) has \(rows.count) rows in docs/PROTOCOL.md")
        if let code = row.code { #expect(code == name.code) } else { #expect(name.isOAuthLogin) }
        let expected = name.dataFields.map { $0.rawValue + (name.optionalDataFields.contains($0) ? "?" : "") }
        #expect((row.data ?? []).sorted() == expected.sorted())
    }

    @Test("every name docs/PROTOCOL.md documents is in the catalogue")
    func noUndocumentedExtras() throws {
        let rows = try Self.documentedRows()
        #expect(rows.count >= DaemonErrorName.allCases.count)
        for row in rows {
            #expect(DaemonErrorName(rawValue: row.name) != nil, "docs/PROTOCOL.md documents \(row.name), which the catalogue lacks")
        }
    }

    @Test("the message is one line naming every value, and a reply read back names the same entry", arguments: DaemonErrorName.allCases)
    func builder(name: DaemonErrorName) {
        var values: [DaemonErrorName.Field: JSONValue] = [:]
        for field in DaemonErrorName.Field.allCases { values[field] = .string("v-\(field.rawValue)") }
        let error = RPCError(name, values)
        #expect(!error.message.isEmpty && !error.message.contains("\n"))
        // Every value shows in the message, but InvalidParams's `field`: its detail names it in words.
        for field in name.fields where field != .field { #expect(error.message.contains("v-\(field.rawValue)"), "\(field) is in the message") }
        // A reply read back from the wire names the same entry.
        #expect(RPCError(json: error.json) == error)
    }
}
