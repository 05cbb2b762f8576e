/// What a user types to name an account: a handle or a DID.
public enum ATIdentifier: Sendable, Hashable {
    case handle(Handle)
    case did(DID)

    /// Parses a DID (anything starting with `did:`) or a handle; a leading `@` on a handle
    /// (`@alice.bsky.social`, as shown in apps) is accepted and dropped.
    public init(parsing input: String) throws(SyntaxError) {
        if input.hasPrefix("did:") {
            self = .did(try DID(validating: input))
            return
        }
        let bare = input.hasPrefix("@") ? String(input.dropFirst()) : input
        do {
            self = .handle(try Handle(validating: bare))
        } catch {
            throw SyntaxError(.identifier, input: input, rule: error.rule)
        }
    }

    public init?(_ description: String) {
        guard let identifier = try? ATIdentifier(parsing: description) else { return nil }
        self = identifier
    }
}

extension ATIdentifier: CustomStringConvertible, LosslessStringConvertible {
    public var description: String {
        switch self {
        case .handle(let handle): handle.description
        case .did(let did): did.description
        }
    }
}

extension ATIdentifier: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let raw = try container.decode(String.self)
        do {
            self = try ATIdentifier(parsing: raw)
        } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.description)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
