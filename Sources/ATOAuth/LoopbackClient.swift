import Foundation

/// The atproto development client: no metadata document, its identity spelt out in the
/// `client_id` itself.
///
/// `client_id` is exactly `http://localhost` (no port, no path) with the query parameters
/// `redirect_uri` and `scope`; the redirect URI uses `127.0.0.1` (never `localhost`, which
/// servers refuse as a redirect host). Such a client is always public, and its sessions end
/// 14 days after login.
public struct LoopbackClient: Sendable, Equatable {
    /// The port the local callback listener uses.
    public let port: Int
    /// The space-separated scopes requested, `atproto` first.
    public let scope: String

    /// - Throws: when `port` is not 1...65535 or `scope` lacks `atproto`.
    public init(port: Int, scope: String = "atproto transition:generic") throws(ClientIdentityError) {
        guard (1...65_535).contains(port) else { throw .invalidPort(port) }
        guard OAuthScope.contains(scope, "atproto") else { throw .scopeLacksAtproto(scope) }
        self.port = port
        self.scope = scope
    }

    /// The path of the redirect URI.
    public static let callbackPath = "/callback"

    /// `http://127.0.0.1:<port>/callback`.
    public var redirectURI: String { "http://127.0.0.1:\(port)\(Self.callbackPath)" }

    /// `http://localhost?redirect_uri=…&scope=…`. Values are percent-encoded with `%20` for
    /// spaces (not `+`): the client_id is a URL, read by URL parsers as well as form parsers, and
    /// `%20` means a space to both. The same string must be sent in every request.
    public var clientID: String {
        "http://localhost?redirect_uri=" + FormEncoding.percentEncode(redirectURI, spaceAsPlus: false)
            + "&scope=" + FormEncoding.percentEncode(scope, spaceAsPlus: false)
    }
}

/// Scope strings: space-separated tokens (RFC 6749 §3.3).
public enum OAuthScope {
    /// The tokens of `scope`, in order.
    public static func tokens(_ scope: String) -> [Substring] {
        scope.split(separator: " ", omittingEmptySubsequences: true)
    }

    /// True when `scope` contains the token `wanted` exactly (not as a prefix of another).
    public static func contains(_ scope: String, _ wanted: String) -> Bool {
        tokens(scope).contains { $0 == wanted }
    }
}

/// A client identity that breaks the atproto client rules.
public enum ClientIdentityError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidPort(Int)
    case scopeLacksAtproto(String)
    case clientIDNotHTTPS(String)
    case noRedirectURI
    case invalidRedirectURI(String)
    case confidentialWithoutKeys
    case duplicateKeyID(String)

    public var description: String {
        switch self {
        case .invalidPort(let port): "the loopback callback port must be 1-65535, not \(port)"
        case .scopeLacksAtproto(let scope): "the scope \"\(scope)\" must contain atproto"
        case .clientIDNotHTTPS(let id): "a hosted client_id must be an https URL with a host, not \(id)"
        case .noRedirectURI: "a client needs at least one redirect URI"
        case .invalidRedirectURI(let uri): "\(uri) is not an absolute redirect URI"
        case .confidentialWithoutKeys: "a confidential client must publish at least one signing key"
        case .duplicateKeyID(let kid): "two signing keys share the key id \(kid)"
        }
    }
}
