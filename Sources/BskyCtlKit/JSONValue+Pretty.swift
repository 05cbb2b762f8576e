import JSONRPC

extension JSONValue {
    /// Pretty-printed JSON as bskyctl prints data: two-space indents, `"key": value`, sorted
    /// keys, unescaped slashes, and `{}` / `[]` for empty containers.
    var prettyPrinted: String {
        var text = ""
        appendPretty(to: &text, indent: "")
        return Console.jsonSafe(text)
    }

    private func appendPretty(to text: inout String, indent: String) {
        let inner = indent + "  "
        switch self {
        case .array(let elements) where !elements.isEmpty:
            text += "[\n"
            for (index, element) in elements.enumerated() {
                text += inner
                element.appendPretty(to: &text, indent: inner)
                text += index == elements.count - 1 ? "\n" : ",\n"
            }
            text += indent + "]"
        case .object(let fields) where !fields.isEmpty:
            text += "{\n"
            let keys = fields.keys.sorted()
            for (index, key) in keys.enumerated() {
                text += inner + String(decoding: JSONValue.string(key).encoded(), as: UTF8.self) + ": "
                fields[key]!.appendPretty(to: &text, indent: inner)
                text += index == keys.count - 1 ? "\n" : ",\n"
            }
            text += indent + "}"
        default:
            // Scalars and empty containers: the compact encoding is already right.
            text += String(decoding: encoded(), as: UTF8.self)
        }
    }
}
