import WebBasics

/// Why a permission cannot be read, in words that name it.
public struct PermissionSyntaxError: Error, Hashable, Sendable, CustomStringConvertible {
    public var permission: String
    public var reason: String
    public var description: String { "'\(permission)' is not a permission: \(reason)" }

    public init(permission: String, reason: String) {
        self.permission = permission
        self.reason = reason
    }
}

extension Permission {
    /// Reads one scope token. Resources, parameter names and actions are matched exactly
    /// (atproto's parser is case-sensitive too); values are percent-decoded.
    public init(parsing token: String) throws(PermissionSyntaxError) {
        func fail(_ reason: String) -> PermissionSyntaxError { PermissionSyntaxError(permission: token, reason: reason) }
        switch token {
        case "atproto": self = .atproto; return
        case "transition:generic": self = .transitionGeneric; return
        case "transition:chat.bsky": self = .transitionChat; return
        case "transition:email": self = .transitionEmail; return
        case "read": self = .read; return
        default: break
        }
        if token.hasPrefix("http:") {
            // A path may hold '?' or '%' nowhere: it is matched as written, before any query.
            let rest = token.dropFirst(5)
            let (method, path) = Self.split(rest, at: ":")
            guard method == "*" || (!method.isEmpty && method.utf8.allSatisfy({ $0 >= 0x41 && $0 <= 0x5A })) else {
                throw fail("the method is an upper-case HTTP method or *, as http:GET:/api/*")
            }
            guard let path, path.hasPrefix("/"), !path.contains("?"), !path.contains("#"), !path.contains("%"),
                  !path.dropLast().contains("*") else {
                throw fail("the path starts with / and may end in * (a prefix), as http:GET:/api/*")
            }
            self = .http(method: method, path: path)
            return
        }
        let (head, query) = Self.split(token, at: "?")
        let (resource, encodedPositional) = Self.split(head, at: ":")
        var positional: String?
        if let encodedPositional {
            guard let decoded = Self.percentDecoded(encodedPositional[...]) else { throw fail("a %-escape is broken") }
            positional = decoded
        }
        guard let parameters = Self.parameters(query) else { throw fail("a parameter is not name=value") }
        func values(_ name: String) -> [String] { parameters.filter { $0.0 == name }.map(\.1) }
        func allowOnly(_ names: Set<String>) throws(PermissionSyntaxError) {
            if let other = parameters.first(where: { !names.contains($0.0) }) {
                throw fail("\(resource) takes no parameter '\(other.0)'")
            }
        }
        switch resource {
        case "repo":
            try allowOnly(["collection", "action"])
            let collections = (positional.map { [$0] } ?? []) + values("collection")
            guard collections.count == 1, let collection = collections.first else {
                throw fail("name one collection (an NSID or *), as repo:app.bsky.feed.post")
            }
            guard collection == "*" || Self.isNSID(collection) else { throw fail("'\(collection)' is not an NSID") }
            var actions = Set<RepoAction>()
            for value in values("action") {
                guard let action = RepoAction(rawValue: value) else { throw fail("action is create, update or delete, not '\(value)'") }
                actions.insert(action)
            }
            self = .repo(collection: collection, actions: actions.isEmpty ? Set(RepoAction.allCases) : actions)
        case "rpc":
            try allowOnly(["lxm", "aud"])
            let methods = (positional.map { [$0] } ?? []) + values("lxm")
            guard methods.count == 1, let method = methods.first else {
                throw fail("name one method (an NSID or *), as rpc:app.bsky.feed.getTimeline")
            }
            guard method == "*" || Self.isNSID(method) else { throw fail("'\(method)' is not an NSID") }
            let audiences = values("aud")
            guard audiences.count <= 1 else { throw fail("aud is given more than once") }
            let audience = audiences.first ?? "*"
            guard audience == "*" || audience.hasPrefix("did:") else { throw fail("aud is a DID with a service (did:web:api.bsky.app#bsky_appview) or *") }
            self = .rpc(method: method, audience: audience)
        case "blob":
            try allowOnly(["accept"])
            let accept = (positional.map { [$0] } ?? []) + values("accept")
            guard !accept.isEmpty else { throw fail("name a media type, as blob:image/* or blob:*/*") }
            for range in accept where !Self.isMediaRange(range) {
                throw fail("'\(range)' is not a media type such as image/png, image/* or */*")
            }
            self = .blob(accept: accept)
        case "account":
            try allowOnly(["attr", "action"])
            let attributes = (positional.map { [$0] } ?? []) + values("attr")
            guard attributes.count == 1, let attribute = attributes.first, Self.accountAttributes.contains(attribute) else {
                throw fail("name one of account:email, account:repo, account:status, account:*")
            }
            let actions = values("action")
            guard actions.count <= 1, let action = AccountAction(rawValue: actions.first ?? "read") else {
                throw fail("action is read or manage")
            }
            self = .account(attribute: attribute, action: action)
        case "identity":
            try allowOnly(["attr"])
            let attributes = (positional.map { [$0] } ?? []) + values("attr")
            guard attributes.count == 1, let attribute = attributes.first, Self.identityAttributes.contains(attribute) else {
                throw fail("name identity:handle or identity:*")
            }
            self = .identity(attribute: attribute)
        case "include":
            guard let positional, Self.isNSID(positional) else { throw fail("include: names a permission set's NSID") }
            self = .include(token)
        default:
            throw fail("the resource is one of repo, rpc, blob, account, identity, include, http (or atproto, transition:generic, read)")
        }
    }

    /// A space-separated scope or policy, each token read; the first unreadable one is the error.
    public static func list(parsing text: String) throws(PermissionSyntaxError) -> [Permission] {
        var result: [Permission] = []
        for token in text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }) {
            result.append(try Permission(parsing: String(token)))
        }
        return result
    }

    private static func split(_ text: some StringProtocol, at separator: Character) -> (String, String?) {
        guard let index = text.firstIndex(of: separator) else { return (String(text), nil) }
        return (String(text[..<index]), String(text[text.index(after: index)...]))
    }

    private static func parameters(_ query: String?) -> [(String, String)]? {
        guard let query, !query.isEmpty else { return [] }
        var result: [(String, String)] = []
        for pair in query.split(separator: "&", omittingEmptySubsequences: false) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty, let value = percentDecoded(parts[1]) else { return nil }
            result.append((String(parts[0]), value))
        }
        return result
    }

    private static func percentDecoded(_ text: Substring) -> String? {
        PercentDecoding.decode(text, plusIsSpace: false)
    }

    /// Loose NSID shape (the daemon checks the call's own NSID strictly): dotted segments of
    /// letters, digits and hyphens, at least three.
    static func isNSID(_ text: String) -> Bool {
        let segments = text.split(separator: ".", omittingEmptySubsequences: false)
        return segments.count >= 3 && segments.allSatisfy { segment in
            !segment.isEmpty && segment.utf8.allSatisfy { $0 == UInt8(ascii: "-") || ($0 < 0x80 && Character(Unicode.Scalar($0)).isLetter) || ($0 >= 0x30 && $0 <= 0x39) }
        }
    }

    static func isMediaRange(_ text: String) -> Bool {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { return false }
        if parts[0] == "*" { return parts[1] == "*" }
        return parts.allSatisfy { $0 == "*" || $0.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7f && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "*") } }
    }
}
