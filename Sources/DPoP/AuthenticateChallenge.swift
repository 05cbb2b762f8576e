/// One challenge of a `WWW-Authenticate` header (RFC 9110 §11.6.1): a scheme and its parameters.
///
/// A header may hold several challenges (`Bearer realm="x", DPoP error="use_dpop_nonce"`);
/// parameter values may be tokens or quoted strings; parameter names are case-insensitive.
public struct AuthenticateChallenge: Sendable, Equatable {
    /// The scheme, lowercased (`dpop`, `bearer`).
    public var scheme: String
    /// Parameters by lowercased name, values unquoted.
    public var parameters: [String: String]

    public init(scheme: String, parameters: [String: String]) {
        self.scheme = scheme
        self.parameters = parameters
    }

    /// The challenges in `header`, in order; malformed trailing text is ignored.
    public static func parse(_ header: String) -> [AuthenticateChallenge] {
        var scanner = Scanner(Array(header.utf8))
        var challenges: [AuthenticateChallenge] = []
        while true {
            scanner.skip { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") || $0 == UInt8(ascii: ",") }
            guard let token = scanner.token() else { break }
            scanner.skipSpaces()
            if scanner.peek == UInt8(ascii: "="), var current = challenges.popLast() {
                // `name=value` continues the previous challenge.
                scanner.advance()
                scanner.skipSpaces()
                guard let value = scanner.quotedString() ?? scanner.token() else { break }
                current.parameters[token.lowercased()] = value
                challenges.append(current)
            } else {
                // A new scheme. (token68 credentials, unused by DPoP, are skipped as unknown tokens.)
                challenges.append(AuthenticateChallenge(scheme: token.lowercased(), parameters: [:]))
                // Its first parameter follows after a space, without a comma.
                scanner.skipSpaces()
                if let name = scanner.tokenFollowedByEquals() {
                    scanner.skipSpaces()
                    guard let value = scanner.quotedString() ?? scanner.token() else { break }
                    challenges[challenges.count - 1].parameters[name.lowercased()] = value
                }
            }
        }
        return challenges
    }

    private struct Scanner {
        let bytes: [UInt8]
        var index = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var peek: UInt8? { index < bytes.count ? bytes[index] : nil }
        mutating func advance() { index += 1 }

        mutating func skip(while predicate: (UInt8) -> Bool) {
            while let byte = peek, predicate(byte) { index += 1 }
        }

        mutating func skipSpaces() { skip { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") } }

        /// An RFC 9110 token (tchar+); token68's `=` padding is excluded on purpose.
        mutating func token() -> String? {
            let start = index
            skip(while: Self.isTokenCharacter)
            return index > start ? String(decoding: bytes[start..<index], as: UTF8.self) : nil
        }

        /// A token only if an `=` follows it (spaces allowed between), consuming both; otherwise nothing.
        mutating func tokenFollowedByEquals() -> String? {
            let start = index
            guard let name = token() else { return nil }
            skipSpaces()
            guard peek == UInt8(ascii: "=") else { index = start; return nil }
            advance()
            return name
        }

        mutating func quotedString() -> String? {
            guard peek == UInt8(ascii: "\"") else { return nil }
            advance()
            var value: [UInt8] = []
            while let byte = peek {
                advance()
                if byte == UInt8(ascii: "\"") { return String(decoding: value, as: UTF8.self) }
                if byte == UInt8(ascii: "\\"), let escaped = peek { value.append(escaped); advance(); continue }
                value.append(byte)
            }
            return nil  // unterminated
        }

        static func isTokenCharacter(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                true
            default:
                Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
            }
        }
    }
}
