/// One atproto permission, as OAuth scopes and blueskyd's client policies spell it:
/// `resource:positional?name=value&…` (atproto's "Auth Scopes" proposal, 0011).
///
/// Only what a client policy can use is modelled; a permission set (`include:`) names
/// permissions published elsewhere and is kept as written.
public enum Permission: Hashable, Sendable, CustomStringConvertible {
    /// Records of one collection (or `*`), for the actions named (all three when none is).
    case repo(collection: String, actions: Set<RepoAction>)
    /// Calls of one method (or `*`) to one service (`aud`, or `*` for any).
    case rpc(method: String, audience: String)
    /// Blob uploads of the media types named (`image/*`, `*/*`, `video/mp4`).
    case blob(accept: [String])
    /// Account settings: `email`, `repo`, `status` or `*`, to read or to manage.
    case account(attribute: String, action: AccountAction)
    /// The account's identity: `handle` or `*`.
    case identity(attribute: String)
    /// A permission set published by a Lexicon (resolved by the authorization server only).
    case include(String)
    /// `atproto`: the base scope every session has; it grants nothing by itself.
    case atproto
    /// `transition:generic`: what an app password may do (repo, rpc, blobs; no account or identity).
    case transitionGeneric
    /// `transition:chat.bsky` and `transition:email`.
    case transitionChat
    case transitionEmail
    /// blueskyd's own `read`: any query (XRPC GET) except those that mint credentials or touch
    /// the account or identity. No OAuth server grants it; policies use it for read-only clients.
    case read
    /// blueskyd's own `http:<METHOD|*>:<path>` for an OAuth 2.0 server's account: calls with
    /// that method to that path, or below it when the path ends in `*` (`http:GET:/api/*`).
    case http(method: String, path: String)

    public enum RepoAction: String, Hashable, Sendable, CaseIterable, Comparable {
        case create, update, delete
        public static func < (a: Self, b: Self) -> Bool { allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)! }
    }

    public enum AccountAction: String, Hashable, Sendable {
        case read, manage
    }

    public static let accountAttributes: Set<String> = ["email", "repo", "status", "*"]
    public static let identityAttributes: Set<String> = ["handle", "*"]

    /// The permission as a scope token.
    public var description: String {
        switch self {
        case .repo(let collection, let actions):
            guard actions != Set(RepoAction.allCases) else { return "repo:\(collection)" }
            return "repo:\(collection)?" + actions.sorted().map { "action=\($0.rawValue)" }.joined(separator: "&")
        case .rpc(let method, let audience):
            return audience == "*" ? "rpc:\(method)" : "rpc:\(method)?aud=\(Self.encodeValue(audience))"
        case .blob(let accept):
            return accept.count == 1 ? "blob:\(accept[0])" : "blob?" + accept.map { "accept=\($0)" }.joined(separator: "&")
        case .account(let attribute, let action):
            return action == .read ? "account:\(attribute)" : "account:\(attribute)?action=\(action.rawValue)"
        case .identity(let attribute): return "identity:\(attribute)"
        case .include(let text): return text
        case .atproto: return "atproto"
        case .transitionGeneric: return "transition:generic"
        case .transitionChat: return "transition:chat.bsky"
        case .transitionEmail: return "transition:email"
        case .read: return "read"
        case .http(let method, let path): return "http:\(method):\(path)"
        }
    }

    /// `#` starts a URL fragment, so a service reference's `#` is written `%23`.
    static func encodeValue(_ value: String) -> String {
        value.reduce(into: "") { text, character in
            switch character {
            case "%": text += "%25"
            case "#": text += "%23"
            default: text.append(character)
            }
        }
    }
}
