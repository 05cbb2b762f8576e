import Foundation

/// Which outbound URLs blueskyd may contact.
///
/// Tokens and passwords travel in these requests, so plain `http` is refused unless the
/// configuration explicitly allows it for a development server on a loopback address.
public struct HTTPPolicy: Sendable, Equatable {
    /// Allow `http://` to 127.0.0.0/8, `[::1]` and `localhost` (development only).
    public var allowInsecureLoopback: Bool

    public init(allowInsecureLoopback: Bool = false) {
        self.allowInsecureLoopback = allowInsecureLoopback
    }

    /// Checks `url` and returns it unchanged, or throws ``HTTPError/insecureURL(_:)``.
    @discardableResult
    public func check(_ url: URL) throws(HTTPError) -> URL {
        guard let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else {
            throw .invalidURL(url.absoluteString)
        }
        switch scheme {
        case "https":
            return url
        case "http" where allowInsecureLoopback && Self.isLoopback(host: host):
            return url
        default:
            throw .insecureURL(url.absoluteString)
        }
    }

    /// True for hosts that can only be reached on this machine.
    public static func isLoopback(host: String) -> Bool {
        let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")).lowercased()
        if bare == "localhost" || bare == "::1" { return true }
        let parts = bare.split(separator: ".")
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }
}
