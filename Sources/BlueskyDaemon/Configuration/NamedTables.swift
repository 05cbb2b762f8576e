import TOMLKit

/// An array of tables of the configuration (`[[client]]`, `[[provider]]`), read alike: each a
/// table of known keys with a `name` of lowercase letters, digits and '-'; every mistake names
/// the array's line, the entry and the key.
struct NamedTables {
    /// `client`, `provider`.
    let kind: String
    let file: String?
    /// The line of the first `[[kind]]`.
    let line: Int?

    /// One entry: its name and table.
    struct Entry {
        let name: String
        let table: TOMLTable
        let tables: NamedTables

        /// A key's non-empty string, nil when absent.
        func string(_ key: String) throws(ConfigurationError) -> String? {
            guard let value = table[key] else { return nil }
            guard let text = value.string, !text.isEmpty else { throw tables.fail("\(tables.kind) '\(name)': \(key) must be a non-empty string") }
            return text
        }

        /// A mistake of this entry.
        func fail(_ what: String) -> ConfigurationError { tables.fail("\(tables.kind) '\(name)': \(what)") }
    }

    init(kind: String, reader: ConfigurationFileReader, file: String?) {
        self.kind = kind
        self.file = file
        line = reader.text.split(separator: "\n", omittingEmptySubsequences: false)
            .firstIndex { $0.drop { $0 == " " || $0 == "\t" }.hasPrefix("[[\(kind)]]") }.map { $0 + 1 }
    }

    func fail(_ what: String) -> ConfigurationError {
        ConfigurationError("\(ConfigurationError.location(file, line))[[\(kind)]]: \(what)")
    }

    /// The entries of `value`, each checked for unknown keys and a valid name; names are unique.
    func entries(_ value: TOMLValueConvertible, keys: [String]) throws(ConfigurationError) -> [Entry] {
        guard let array = value.array else { throw fail("write each \(kind) as a [[\(kind)]] table") }
        var entries: [Entry] = []
        for element in array {
            guard let table = element.table else { throw fail("write each \(kind) as a [[\(kind)]] table") }
            for key in table.keys where !keys.contains(key) {
                throw fail("unknown key '\(key)' (known: \(keys.joined(separator: ", ")))")
            }
            guard let name = table["name"]?.string, !name.isEmpty,
                  name.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7a) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2d }) else {
                throw fail("each \(kind) needs a name of lowercase letters, digits and '-'")
            }
            guard !entries.contains(where: { $0.name == name }) else { throw fail("two \(kind)s are named '\(name)'") }
            entries.append(Entry(name: name, table: table, tables: self))
        }
        return entries
    }
}
