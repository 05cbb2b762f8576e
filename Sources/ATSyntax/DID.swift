/// A decentralised identifier (`did:plc:...`, `did:web:...`), checked against the atproto DID
/// syntax. Case is significant and kept as given.
public struct DID: Sendable, Hashable {
    public static let maxLength = 2048

    /// The DID method, the part between the first two colons.
    public enum Method: Sendable, Hashable, CustomStringConvertible {
        case plc
        case web
        case other(String)

        init(name: String) {
            switch name {
            case "plc": self = .plc
            case "web": self = .web
            default: self = .other(name)
            }
        }

        public var description: String {
            switch self {
            case .plc: "plc"
            case .web: "web"
            case .other(let name): name
            }
        }
    }

    /// The whole DID, e.g. `did:plc:7iza6de2dwap2sbkpav7c6c6`.
    public let string: String
    /// The method, e.g. `.plc`.
    public let method: Method
    /// The method-specific identifier: everything after `did:<method>:`.
    public let identifier: String

    /// Parses `input`, throwing the rule it breaks.
    public init(validating input: String) throws(SyntaxError) {
        func fail(_ rule: String) -> SyntaxError { SyntaxError(.did, input: input, rule: rule) }

        guard input.utf8.count <= Self.maxLength else {
            throw fail("longer than \(Self.maxLength) characters")
        }
        guard input.hasPrefix("did:") else { throw fail("must start with \"did:\" (lowercase)") }
        let rest = input.utf8.dropFirst(4)
        guard let colon = rest.firstIndex(of: UInt8(ascii: ":")) else {
            throw fail("must have the form did:<method>:<identifier>")
        }
        let methodBytes = rest[..<colon]
        guard !methodBytes.isEmpty else { throw fail("the method is empty") }
        guard methodBytes.allSatisfy({ $0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z") }) else {
            throw fail("the method must be lowercase letters a-z only")
        }
        let identifierBytes = rest[rest.index(after: colon)...]
        guard let last = identifierBytes.last else { throw fail("the method-specific identifier is empty") }
        if let problem = Self.identifierProblem(Array(identifierBytes)) { throw fail(problem) }
        if last == UInt8(ascii: ":") || last == UInt8(ascii: "%") {
            throw fail("must not end with \":\" or \"%\"")
        }
        self.string = input
        self.method = Method(name: String(decoding: methodBytes, as: UTF8.self))
        self.identifier = String(decoding: identifierBytes, as: UTF8.self)
    }

    public init?(_ description: String) {
        guard let did = try? DID(validating: description) else { return nil }
        self = did
    }

    /// Allowed: ASCII letters, digits, `.` `_` `:` `-`, and `%` followed by two hex digits.
    private static func identifierProblem(_ bytes: [UInt8]) -> String? {
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count,
                      isHexDigit(bytes[index + 1]), isHexDigit(bytes[index + 2]) else {
                    return "\"%\" must be followed by two hex digits"
                }
                index += 3
                continue
            }
            let allowed = DomainRules.isASCIIAlphanumeric(byte)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_")
                || byte == UInt8(ascii: ":") || byte == UInt8(ascii: "-")
            if !allowed {
                return "the identifier may only hold ASCII letters, digits, \".\", \"_\", \":\", \"-\" and %-escapes"
            }
            index += 1
        }
        return nil
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        DomainRules.isASCIIDigit(byte)
            || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F"))
    }
}

extension DID: CustomStringConvertible, LosslessStringConvertible {
    public var description: String { string }
}

extension DID: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let raw = try container.decode(String.self)
        do {
            self = try DID(validating: raw)
        } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.description)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(string)
    }
}
