import JSONRPC
import WebBasics

/// Finds a request's method override the way the servers that honour one read it.
///
/// Rails (Rack's `MethodOverride`), Laravel and Symfony take `_method` from the query or from
/// a form body's fields, and read JSON bodies into the same parameters. Each decodes first, so
/// `%5Fmethod`, `_%6Dethod` and `"\u005fmethod"` are `_method` to them; they are here too.
/// Looking is strict where it cannot be exact: a key that merely starts with `_method`
/// (`_method[]`), any case, counts; a JSON-looking body that does not parse, or a multipart
/// body naming `_method` anywhere, counts; the answer is then to grant every method.
enum MethodOverride {
    static func find(query: String?, body: [UInt8]?) -> String? {
        if let query, formKeys(Array(query.utf8)).contains(where: isOverride) { return "_method in the query" }
        guard let body, !body.isEmpty else { return nil }
        let start = body.firstIndex { !isWhitespace($0) } ?? body.endIndex
        guard start != body.endIndex else { return nil }
        switch body[start] {
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            guard let value = try? JSONValue.parse(body) else { return "a JSON body blueskyd cannot read whole" }
            return hasOverrideKey(value) ? "_method in the JSON body" : nil
        case UInt8(ascii: "-") where body[start...].starts(with: Array("--".utf8)):
            // multipart/form-data: a part named `_method`, in any of the ways a name is written.
            let decoded = PercentDecoding.decode(String(decoding: body, as: UTF8.self), plusIsSpace: false).map { Array($0.utf8) } ?? body
            return contains(decoded, "_method") || contains(body, "_method") || contains(body, "%5fmethod")
                ? "_method in the multipart body" : nil
        default:
            return formKeys(body).contains(where: isOverride) ? "_method in the form body" : nil
        }
    }

    /// The decoded keys of `name=value` pairs split at `&` or `;` (older Rack splits at both).
    static func formKeys(_ bytes: [UInt8]) -> [String] {
        bytes.split(whereSeparator: { $0 == UInt8(ascii: "&") || $0 == UInt8(ascii: ";") }).map { pair in
            let key = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false).first ?? pair[...]
            let raw = String(decoding: key, as: UTF8.self)
            // A broken escape stays as written; `%5F` left encoded still reads as an override.
            return PercentDecoding.decode(raw, plusIsSpace: true) ?? raw.replacingOccurrences(of: "%5F", with: "_")
                .replacingOccurrences(of: "%5f", with: "_")
        }
    }

    static func isOverride(_ key: String) -> Bool {
        let trimmed = key.drop { $0 == " " || $0 == "\t" }
        return trimmed.utf8.count >= 7 && String(trimmed.prefix(7)).lowercased() == "_method"
    }

    /// `_method` as a key at any depth of a JSON value.
    static func hasOverrideKey(_ value: JSONValue) -> Bool {
        switch value {
        case .object(let fields): fields.contains { isOverride($0.key) || hasOverrideKey($0.value) }
        case .array(let items): items.contains(where: hasOverrideKey)
        default: false
        }
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    /// Whether `haystack` holds `needle` (lowercase ASCII), ignoring ASCII case.
    private static func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
        let pattern = Array(needle.utf8)
        guard haystack.count >= pattern.count else { return false }
        for start in 0...(haystack.count - pattern.count) {
            var index = 0
            while index < pattern.count, lowered(haystack[start + index]) == pattern[index] { index += 1 }
            if index == pattern.count { return true }
        }
        return false
    }

    private static func lowered(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5A ? byte + 0x20 : byte }
}
