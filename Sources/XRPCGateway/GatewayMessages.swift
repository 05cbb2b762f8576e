import JSONRPC
import NIOCore
import NIOHTTP1
import RPCServer

/// One HTTP request the gateway admitted, with its whole body.
public struct GatewayRequest: Sendable {
    public var method: HTTPMethod
    /// The request target as sent: path and query.
    public var uri: String
    public var headers: HTTPHeaders
    public var body: ByteBuffer
    /// Who sent it (the Unix socket's peer credentials).
    public var peer: PeerCredentials?

    public init(method: HTTPMethod, uri: String, headers: HTTPHeaders, body: ByteBuffer, peer: PeerCredentials?) {
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

/// What the gateway sends back: a status, headers (`content-length` is added) and a body.
public struct GatewayResponse: Sendable {
    public var status: HTTPResponseStatus
    public var headers: [(String, String)]
    public var body: ByteBuffer

    public init(status: HTTPResponseStatus, headers: [(String, String)] = [], body: ByteBuffer = ByteBuffer()) {
        self.status = status
        self.headers = headers
        self.body = body
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
