/// Permissions held together, as a session's scope or a client's policy: what they grant.
public struct PermissionGrant: Hashable, Sendable, CustomStringConvertible {
    public var permissions: [Permission]

    public init(_ permissions: [Permission]) {
        self.permissions = permissions
    }

    /// Reads a space-separated scope or policy.
    public init(parsing text: String) throws(PermissionSyntaxError) {
        permissions = try Permission.list(parsing: text)
    }

    public var description: String { permissions.map(\.description).joined(separator: " ") }

    /// The first need of `needs` nothing here grants, or nil when all are granted.
    public func firstMissing(_ needs: [PermissionNeed]) -> PermissionNeed? {
        needs.first { need in !permissions.contains { $0.grants(need) } }
    }

    public func grants(_ need: PermissionNeed) -> Bool {
        permissions.contains { $0.grants(need) }
    }
}

extension Permission {
    /// Whether this one permission covers `need`.
    public func grants(_ need: PermissionNeed) -> Bool {
        switch (self, need) {
        case (.transitionGeneric, .repo), (.transitionGeneric, .rpc), (.transitionGeneric, .blob):
            return true
        case (.transitionEmail, .account(attribute: "email", _)):
            return true
        case (.read, .rpc(_, _, let isQuery)):
            return isQuery
        case (.read, .http(let method, _)):
            return method == "GET" || method == "HEAD"
        case (.http(let method, let path), .http(let wanted, let wantedPath)):
            guard method == "*" || method == wanted else { return false }
            return path.hasSuffix("*") ? wantedPath.hasPrefix(path.dropLast()) : wantedPath == path
        case (.repo(let collection, let actions), .repo(let wanted, let action)):
            return (collection == "*" || collection == wanted) && actions.contains(action)
        case (.rpc(let method, let audience), .rpc(let wanted, let wantedAudience, _)):
            // A call without atproto-proxy goes where the PDS sends it; a method granted for
            // any one service covers it.
            return (method == "*" || method == wanted)
                && (audience == "*" || wantedAudience == nil || audience == wantedAudience)
        case (.blob(let accept), .blob(let mediaType)):
            return accept.contains { Self.mediaRange($0, matches: mediaType) }
        case (.account(let attribute, let action), .account(let wanted, let wantedAction)):
            return (attribute == "*" || attribute == wanted) && (action == .manage || wantedAction == .read)
        case (.identity(let attribute), .identity(let wanted)):
            return attribute == "*" || attribute == wanted
        default:
            return false
        }
    }

    /// `*/*`, `image/*` or an exact type against a media type (parameters and case ignored).
    static func mediaRange(_ range: String, matches mediaType: String) -> Bool {
        let type = String((mediaType.split(separator: ";").first ?? Substring(mediaType)).filter { $0 != " " }).lowercased()
        let range = range.lowercased()
        if range == "*/*" { return true }
        if range.hasSuffix("/*") { return type.hasPrefix(range.dropLast()) }
        return range == type
    }
}
