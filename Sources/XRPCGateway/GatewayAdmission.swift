import JSONRPC
import NIOHTTP1
import RPCServer

/// Who may use the gateway: the daemon's own user, and never a web page.
///
/// A browser can send requests to any local address; a page that reaches the gateway (by a
/// loopback port, or a name rebound to 127.0.0.1) must get nothing. Browsers always say where
/// a cross-site request comes from (`Origin` on every such POST and on fetches, `Referer` on
/// navigations and images unless the page forbids it) and name the host they think they
/// reach; programs using the gateway send neither header and name localhost. So any request
/// with `Origin` or `Referer`, or with a `Host` other than the gateway's own names, is refused.
public struct GatewayAdmission: Sendable {
    /// Names a client may put in `Host` (lowercased; any port on a Unix socket; `blueskyd` only
    /// there).
    public static let localNames: Set<String> = ["localhost", "127.0.0.1", "[::1]", "blueskyd"]

    public var allowedUID: UInt32
    /// Serve every local user (the metrics' TCP listener, for a Prometheus running as its own user).
    public var anyUser = false
    /// The loopback port for a TCP listener: `Host` must then name it (or no port).
    public var port: Int?
    /// Whether a request whose sender's uid cannot be read carries a local token that vouches
    /// for it: the token file's, which only the daemon's user can read. A `bskyctl exec`
    /// token vouches for nothing: its program may hand it on, and it is honoured over TCP
    /// only from a connection whose owner is the daemon's user.
    public var vouchedFor: (@Sendable (HTTPRequestHead) -> Bool)?

    public init(allowedUID: UInt32, port: Int? = nil, vouchedFor: (@Sendable (HTTPRequestHead) -> Bool)? = nil) {
        self.allowedUID = allowedUID
        self.port = port
        self.vouchedFor = vouchedFor
    }

    /// Why `head` from `peer` is refused, or nil when it is admitted.
    public func refusal(of head: HTTPRequestHead, peer: PeerCredentials?) -> GatewayRefusal? {
        if anyUser {
            // Who it is does not matter; that it is no web page still does.
        } else if let peer {
            guard peer.uid == allowedUID else { return .otherUser(uid: peer.uid) }
        } else {
            guard vouchedFor?(head) == true else { return .unknownPeer }
        }
        if head.headers.contains(name: "origin") { return .browser(header: "Origin") }
        if head.headers.contains(name: "referer") { return .browser(header: "Referer") }
        let hosts = head.headers["host"]
        guard let host = hosts.first, hosts.count == 1 else {
            return head.version.minor >= 1 || hosts.count > 1 ? .badHost(hosts.joined(separator: ", ")) : nil
        }
        return isLocal(host) ? nil : .badHost(host)
    }

    /// `host` is one of `localNames`, with no port, or (TCP) with the listener's, or (a Unix
    /// socket) with any.
    func isLocal(_ host: String) -> Bool {
        let lowered = host.lowercased()
        var name = Substring(lowered)
        var givenPort: Substring?
        if let colon = lowered.lastIndex(of: ":"), !lowered[colon...].contains("]") {
            name = lowered[..<colon]
            givenPort = lowered[lowered.index(after: colon)...]
        }
        guard Self.localNames.contains(String(name)) else { return false }
        // A single-label name is what a search domain or a rebinding DNS answer can give a
        // web page's request over TCP; on a Unix socket no browser can send one.
        if port != nil, name == "blueskyd" { return false }
        guard let givenPort else { return true }
        guard let number = Int(givenPort), (0...65535).contains(number) else { return false }
        return port.map { $0 == number } ?? true
    }
}

/// Why the gateway refused a request before looking at it.
public enum GatewayRefusal: Sendable, Hashable, CustomStringConvertible {
    /// The peer's credentials could not be read.
    case unknownPeer
    case otherUser(uid: UInt32)
    /// A browser's request (the header that shows it).
    case browser(header: String)
    /// A `Host` that is none of the gateway's names (several, or none in HTTP/1.1).
    case badHost(String)

    public var description: String {
        switch self {
        case .unknownPeer: "the caller's credentials cannot be read"
        case .otherUser(let uid): "uid \(uid) is not the daemon's user"
        case .browser(let header):
            "requests from web pages are refused (the request carries \(header)); programs send no Origin or Referer"
        case .badHost(let host):
            host.isEmpty ? "the request names no Host" : "Host '\(host)' is not the gateway's (use localhost)"
        }
    }

    /// The reason in metrics: `other-user`, `unknown-peer`, `browser` or `host`.
    public var reason: String {
        switch self {
        case .unknownPeer: "unknown-peer"
        case .otherUser: "other-user"
        case .browser: "browser"
        case .badHost: "host"
        }
    }

    /// The stable name in the XRPC error body.
    public var name: String {
        switch self {
        case .unknownPeer, .otherUser: DaemonErrorName.permissionDenied.rawValue
        case .browser, .badHost: GatewayErrorName.browserRequestRefused.rawValue
        }
    }

    /// Every refusal is 403 Forbidden with an XRPC error body, and ends the connection.
    public var response: GatewayResponse {
        .xrpcError(.forbidden, name, description)
    }
}
