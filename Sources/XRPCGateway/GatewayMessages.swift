import BlueskyHTTP
import JSONRPC
import NIOCore
import NIOHTTP1
import NIOPosix
import RPCServer

/// A request's body: small ones held whole (a call can then be sent again after a refresh),
/// larger ones or those of unknown length read as they are sent on.
public enum GatewayRequestBody: Sendable {
    case whole(ByteBuffer)
    case streamed(ChunkSource)

    public var isEmpty: Bool {
        if case .whole(let buffer) = self { return buffer.readableBytes == 0 }
        return false
    }
}

/// One HTTP request the gateway admitted.
public struct GatewayRequest: Sendable {
    public var method: HTTPMethod
    /// The request target as sent: path and query.
    public var uri: String
    public var headers: HTTPHeaders
    public var body: GatewayRequestBody
    /// Who sent it (the Unix socket's peer credentials, or the uid a loopback client's socket
    /// belongs to).
    public var peer: PeerCredentials?
    /// On loopback TCP: the client's socket in the kernel's table.
    public var loopbackSocket: LoopbackClientSocket?

    public init(method: HTTPMethod, uri: String, headers: HTTPHeaders, body: GatewayRequestBody, peer: PeerCredentials?) {
        self.method = method
        self.uri = uri
        self.headers = headers
        self.body = body
        self.peer = peer
    }

    /// The path, without the query.
    public var path: Substring {
        uri.firstIndex(of: "?").map { uri[..<$0] } ?? uri[...]
    }

    /// The query after `?`, nil when there is none.
    public var query: Substring? {
        uri.firstIndex(of: "?").map { uri[uri.index(after: $0)...] }
    }
}

extension GatewayRequest {
    /// The pid of the process that sent it: its peer credentials' on a Unix socket; on TCP the
    /// process holding the client's socket, looked for in /proc (on NIO's blocking pool: it reads
    /// every descriptor of the user's processes, so only what needs it asks, a write's journal
    /// line). Nil when it cannot be found.
    public func senderProcess() async -> Int32? {
        if let pid = peer?.pid, pid > 0 { return pid }
        guard let socket = loopbackSocket else { return nil }
        return try? await NIOThreadPool.singleton.runIfActive {
            LoopbackPeerOwner.process(holdingSocket: socket.inode, uid: socket.uid)
        }
    }
}

/// What the gateway sends back: a status, headers (`content-length` is added when known) and
/// a body, whole or passed on as it arrives.
public struct GatewayResponse: Sendable {
    public enum Body: Sendable {
        case whole(ByteBuffer)
        /// Written as it is read; the answer is cut off (and its connection closed) when no
        /// chunk comes for `stallTimeout`.
        case streamed(ChunkSource, stallTimeout: Duration)
    }

    public var status: HTTPResponseStatus
    public var headers: [(String, String)]
    public var body: Body

    public init(status: HTTPResponseStatus, headers: [(String, String)] = [], body: ByteBuffer = ByteBuffer()) {
        self.status = status
        self.headers = headers
        self.body = .whole(body)
    }

    public init(status: HTTPResponseStatus, headers: [(String, String)], streamed: ChunkSource, stallTimeout: Duration) {
        self.status = status
        self.headers = headers
        self.body = .streamed(streamed, stallTimeout: stallTimeout)
    }

    /// An XRPC error answer: `{"error": name, "message": message}` and any further fields.
    public static func xrpcError(_ status: HTTPResponseStatus, _ name: String, _ message: String,
                                 fields: [String: JSONValue] = [:], headers: [(String, String)] = []) -> GatewayResponse {
        var object = fields
        object["error"] = .string(name)
        object["message"] = .string(message)
        let text = JSONValue.object(object).encoded()
        return GatewayResponse(status: status, headers: [("Content-Type", "application/json")] + headers,
                               body: ByteBuffer(bytes: text))
    }
}

/// Answers the requests the gateway admits.
public protocol GatewayHandler: Sendable {
    func respond(to request: GatewayRequest) async -> GatewayResponse
}
