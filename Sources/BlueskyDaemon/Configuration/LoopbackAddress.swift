/// A loopback TCP address (`gateway_listen`): `127.0.0.1:9583`, `[::1]:9583`, `localhost:9583`.
/// Anything that is not loopback is refused: the gateway's accounts are for this machine's
/// user only, and a wider address would put them on the network.
public struct LoopbackAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `text`; nil when it is not `host:port` with a loopback host and a port 0...65535.
    public init?(_ text: String) {
        var host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard let port = Int(portText), (0...65535).contains(port) else { return nil }
        if host == "localhost" { host = "127.0.0.1" }
        guard Self.isLoopback(host) else { return nil }
        self.host = String(host)
        self.port = port
    }

    /// 127.0.0.0/8 or ::1, written as dotted quads or `::1`.
    static func isLoopback(_ host: Substring) -> Bool {
        if host == "::1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts.allSatisfy({ part in
            !part.isEmpty && part.count <= 3 && part.allSatisfy(\.isASCII) && part.allSatisfy(\.isNumber)
                && Int(part).map { $0 <= 255 } == true
        }) else { return false }
        return parts[0] == "127"
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
