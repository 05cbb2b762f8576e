/// An atproto handle: a DNS name such as `alice.bsky.social`, normalised to lowercase.
///
/// Syntax only: whether the handle resolves (and to which DID) is ATIdentity's job.
public struct Handle: Sendable, Hashable {
    public static let maxLength = 253

    /// The handle in lowercase, without a leading `@`.
    public let string: String

    /// Parses `input`, throwing the rule it breaks.
    public init(validating input: String) throws(SyntaxError) {
        func fail(_ rule: String) -> SyntaxError { SyntaxError(.handle, input: input, rule: rule) }

        guard !input.isEmpty else { throw fail("empty") }
        guard input.utf8.count <= Self.maxLength else {
            throw fail("longer than \(Self.maxLength) characters")
        }
        guard input.utf8.allSatisfy({ $0 < 0x80 }) else {
            throw fail("not ASCII (internationalised names must be written in punycode, xn--...)")
        }
        let labels = input.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2 else { throw fail("needs at least two segments separated by dots") }
        for label in labels {
            if let problem = DomainRules.labelProblem(label.utf8) { throw fail(problem) }
        }
        guard let tldFirst = labels.last?.utf8.first, DomainRules.isASCIILetter(tldFirst) else {
            throw fail("the last segment (top-level domain) must start with a letter")
        }
        self.string = input.lowercased()
    }

    public init?(_ description: String) {
        guard let handle = try? Handle(validating: description) else { return nil }
        self = handle
    }
}

extension Handle: CustomStringConvertible, LosslessStringConvertible {
    public var description: String { string }
}

extension Handle: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let raw = try container.decode(String.self)
        do {
            self = try Handle(validating: raw)
        } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.description)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(string)
    }
}
