/// Why a string is not a valid handle, DID or NSID: one clear line naming the rule that failed.
public struct SyntaxError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Which kind of identifier was being parsed.
    public enum Kind: String, Sendable, Hashable {
        case handle
        case did = "DID"
        case nsid = "NSID"
        case identifier = "handle or DID"
    }

    public let kind: Kind
    /// The rejected input (shortened when very long, so error lines stay readable).
    public let input: String
    /// The rule that failed, in plain words.
    public let rule: String

    public init(_ kind: Kind, input: String, rule: String) {
        self.kind = kind
        self.input = input.count > 80 ? String(input.prefix(77)) + "..." : input
        self.rule = rule
    }

    public var description: String {
        "invalid \(kind.rawValue) \"\(input)\": \(rule)"
    }
}
