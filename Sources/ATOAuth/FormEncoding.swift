import WebBasics

/// `application/x-www-form-urlencoded` (the HTML form encoding RFC 6749 Appendix B uses for
/// every OAuth request body and for the callback's query).
///
/// Names and values are UTF-8, every byte outside RFC 3986's unreserved set is percent-encoded,
/// and a space becomes `+`. On decoding `+` means a space and `%2B` a plus sign, so a client
/// that writes `+` for spaces and a server that reads `%20` both understand each other.
public struct FormBody: Sendable, Equatable {
    /// The fields in order. Order does not matter to servers, but stable output makes
    /// tests and logs readable.
    public private(set) var fields: [(name: String, value: String)]

    public init(_ fields: [(String, String)] = []) {
        self.fields = fields.map { (name: $0.0, value: $0.1) }
    }

    /// Appends a field; nil values are left out, so optional parameters read naturally.
    public mutating func append(_ name: String, _ value: String?) {
        guard let value else { return }
        fields.append((name, value))
    }

    /// The value of the first field called `name`.
    public subscript(name: String) -> String? {
        fields.first { $0.name == name }?.value
    }

    /// The encoded body.
    public var encoded: String {
        fields.map { FormEncoding.encode($0.name) + "=" + FormEncoding.encode($0.value) }.joined(separator: "&")
    }

    /// The `Content-Type` to send with ``encoded``.
    public static let contentType = "application/x-www-form-urlencoded"

    public static func == (lhs: FormBody, rhs: FormBody) -> Bool {
        lhs.fields.elementsEqual(rhs.fields) { $0.name == $1.name && $0.value == $1.value }
    }
}

extension FormBody: CustomStringConvertible {
    /// Field names only: bodies carry codes, verifiers, tokens and client assertions.
    public var description: String { "FormBody(\(fields.map(\.name).joined(separator: ", ")))" }
}

public enum FormEncoding {
    /// RFC 3986 unreserved characters: `A-Z a-z 0-9 - . _ ~`.
    public static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }

    /// Form-encodes one name or value (space as `+`).
    public static func encode(_ text: String) -> String {
        percentEncode(text, spaceAsPlus: true)
    }

    /// Percent-encodes everything outside the unreserved set; a space becomes `+` only when
    /// asked (form bodies), `%20` otherwise (URL query components read by any parser).
    public static func percentEncode(_ text: String, spaceAsPlus: Bool) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            if isUnreserved(byte) {
                output.append(byte)
            } else if byte == UInt8(ascii: " "), spaceAsPlus {
                output.append(UInt8(ascii: "+"))
            } else {
                output.append(contentsOf: [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]])
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Decodes a form-encoded query or body into fields, in order; nil when a `%` is not followed
    /// by two hex digits or the result is not UTF-8.
    public static func decode(_ text: some StringProtocol) -> [(name: String, value: String)]? {
        var fields: [(name: String, value: String)] = []
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = decodeComponent(parts[0]),
                  let value = parts.count == 2 ? decodeComponent(parts[1]) : "" else { return nil }
            fields.append((name, value))
        }
        return fields
    }

    /// Decodes one component: `+` is a space, `%XX` a byte.
    public static func decodeComponent(_ text: some StringProtocol) -> String? {
        PercentDecoding.decode(text, plusIsSpace: true)
    }
}
