import Foundation

/// Where a keep-alive connection goes: scheme, host and port, which is what two requests
/// must share to use the same connection.
struct HTTP1Origin: Hashable, Sendable {
    var isTLS: Bool
    var host: String
    var port: Int

    /// Nil for URLs without a host or with a scheme other than http and https.
    init?(_ url: URL) {
        guard let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http",
              let host = url.host, !host.isEmpty else { return nil }
        isTLS = scheme == "https"
        // Foundation keeps the brackets of an IPv6 literal on some platforms and not on others.
        self.host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        port = url.port ?? (isTLS ? 443 : 80)
    }

    private var defaultPort: Int { isTLS ? 443 : 80 }

    /// An IPv6 literal (the only hosts with a colon) or a dotted IPv4 address.
    var isIPv6Literal: Bool { host.utf8.contains(UInt8(ascii: ":")) }

    var isIPAddress: Bool {
        isIPv6Literal || host.utf8.allSatisfy { $0 == UInt8(ascii: ".") || ($0 >= 0x30 && $0 <= 0x39) }
    }

    /// The `Host` header: the port only when it is not the scheme's default.
    var hostHeader: String {
        let name = isIPv6Literal ? "[\(host)]" : host
        return port == defaultPort ? name : "\(name):\(port)"
    }

    /// The request target of `url` (path and query, never the fragment), taken from the URL's
    /// text so that percent-escapes reach the server exactly as they were written.
    static func requestTarget(of url: URL) -> String {
        let text = url.absoluteString.utf8
        guard let schemeEnd = text.firstRange(of: "://".utf8)?.upperBound else { return "/" }
        let afterAuthority = text[schemeEnd...].firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
        guard let start = afterAuthority else { return "/" }
        let end = text[start...].firstIndex(of: UInt8(ascii: "#")) ?? text.endIndex
        let target = String(decoding: text[start..<end], as: UTF8.self)
        if target.isEmpty { return "/" }
        return target.hasPrefix("?") ? "/" + target : target
    }
}
