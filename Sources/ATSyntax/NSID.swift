/// A namespaced identifier for a Lexicon schema or XRPC method, e.g. `com.atproto.server.createSession`:
/// a reversed domain name (the authority) followed by a name.
public struct NSID: Sendable, Hashable {
    public static let maxLength = 317
    public static let maxNameLength = 63

    /// The NSID exactly as given.
    public let string: String

    /// Parses `input`, throwing the rule it breaks.
    public init(validating input: String) throws(SyntaxError) {
        func fail(_ rule: String) -> SyntaxError { SyntaxError(.nsid, input: input, rule: rule) }

        guard !input.isEmpty else { throw fail("empty") }
        guard input.utf8.count <= Self.maxLength else {
            throw fail("longer than \(Self.maxLength) characters")
        }
        guard input.utf8.allSatisfy({ $0 < 0x80 }) else { throw fail("not ASCII") }
        let segments = input.split(separator: ".", omittingEmptySubsequences: false)
        guard segments.count >= 3 else {
            throw fail("needs at least three segments (a reversed domain and a name)")
        }
        let authority = segments.dropLast()
        for segment in authority {
            if let problem = DomainRules.labelProblem(segment.utf8) { throw fail(problem) }
        }
        guard let tldFirst = authority.first?.utf8.first, DomainRules.isASCIILetter(tldFirst) else {
            throw fail("the first segment (top-level domain) must start with a letter")
        }
        let name = segments[segments.count - 1].utf8
        guard let nameFirst = name.first else { throw fail("the name (last segment) is empty") }
        guard name.count <= Self.maxNameLength else {
            throw fail("the name (last segment) is longer than \(Self.maxNameLength) characters")
        }
        guard DomainRules.isASCIILetter(nameFirst), name.allSatisfy(DomainRules.isASCIIAlphanumeric) else {
            throw fail("the name (last segment) must be ASCII letters and digits, starting with a letter")
        }
        self.string = input
    }

    public init?(_ description: String) {
        guard let nsid = try? NSID(validating: description) else { return nil }
        self = nsid
    }

    /// The domain authority in normal DNS order (every segment but the name, reversed):
    /// `server.atproto.com` for `com.atproto.server.createSession`.
    public var authority: String {
        string.split(separator: ".").dropLast().reversed().joined(separator: ".")
    }

    /// The last segment: `createSession` for `com.atproto.server.createSession`.
    public var name: String {
        String(string.split(separator: ".").last ?? "")
    }
}

extension NSID: CustomStringConvertible, LosslessStringConvertible {
    public var description: String { string }
}

extension NSID: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let raw = try container.decode(String.self)
        do {
            self = try NSID(validating: raw)
        } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.description)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(string)
    }
}
