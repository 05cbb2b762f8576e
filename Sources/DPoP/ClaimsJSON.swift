import JSONRPC

/// The little JSON writing that proofs need, straight into a byte buffer.
///
/// Foundation's `JSONEncoder` costs more than the P-256 signature itself for a claims set this
/// small; proof claims are a handful of strings and one integer, so they are written by hand
/// (strings escaped by JSONRPC's writer).
enum ClaimsJSON {
    /// Appends `"name":"value"` (with a leading comma unless it is the first member).
    static func appendMember(_ name: StaticString, _ value: String, first: Bool = false, to output: inout [UInt8]) {
        appendName(name, first: first, to: &output)
        JSONValue.appendString(value, to: &output)
    }

    /// Appends `"name":<integer>`.
    static func appendMember(_ name: StaticString, _ value: Int, first: Bool = false, to output: inout [UInt8]) {
        appendName(name, first: first, to: &output)
        output.append(contentsOf: String(value).utf8)
    }

    private static func appendName(_ name: StaticString, first: Bool, to output: inout [UInt8]) {
        if !first { output.append(UInt8(ascii: ",")) }
        output.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { output.append(contentsOf: $0) }
        output.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
    }
}
