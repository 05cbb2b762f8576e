import Logging
import NIOCore
import NIOHTTP1
import RPCServer

/// One client connection: requests answered one after another (keep-alive), each admitted
/// first; a refused request, a body over the limit or a broken message ends the connection.
struct GatewayConnection: Sendable {
    let channel: NIOAsyncChannel<HTTPServerRequestPart, Never>
    let peer: PeerCredentials?
    let handler: any GatewayHandler
    let admission: GatewayAdmission
    let maxRequestBodyBytes: Int
    let isShuttingDown: @Sendable () -> Bool
    let logger: Logger

    func serve() async {
        do {
            try await channel.executeThenClose { inbound in
                var parts = inbound.makeAsyncIterator()
                while let part = try await parts.next() {
                    guard case .head(let head) = part else { return }
                    if let refusal = admission.refusal(of: head, peer: peer) {
                        logger.notice("gateway refused a request", metadata: [
                            "reason": "\(refusal)", "pid": "\(peer.flatMap { $0.pid > 0 ? String($0.pid) : nil } ?? "?")",
                        ])
                        try await write(refusal.response, for: head, keepAlive: false)
                        return
                    }
                    if let length = head.headers.first(name: "content-length").flatMap(Int.init),
                       length > maxRequestBodyBytes {
                        try await write(tooLarge, for: head, keepAlive: false)
                        return
                    }
                    var body = ByteBuffer()
                    var ended = false
                    var overLimit = false
                    reading: while let next = try await parts.next() {
                        switch next {
                        case .body(var chunk):
                            if body.readableBytes + chunk.readableBytes > maxRequestBodyBytes {
                                overLimit = true
                                break reading
                            }
                            body.writeBuffer(&chunk)
                        case .end:
                            ended = true
                            break reading
                        case .head:
                            return
                        }
                    }
                    if overLimit {
                        try await write(tooLarge, for: head, keepAlive: false)
                        return
                    }
                    // The client left before its request ended: nobody to answer.
                    guard ended else { return }
                    let request = GatewayRequest(method: head.method, uri: head.uri, headers: head.headers, body: body,
                                                 peer: peer)
                    let response = await handler.respond(to: request)
                    let keepAlive = head.isKeepAlive && !isShuttingDown()
                    try await write(response, for: head, keepAlive: keepAlive)
                    if !keepAlive { return }
                }
            }
        } catch {
            logger.debug("gateway connection ended", metadata: ["error": "\(error)"])
        }
    }

    private var tooLarge: GatewayResponse {
        .xrpcError(.payloadTooLarge, GatewayErrorName.payloadTooLarge.rawValue,
                   "the request body is larger than the gateway takes (\(maxRequestBodyBytes) bytes)")
    }

    private func write(_ response: GatewayResponse, for request: HTTPRequestHead, keepAlive: Bool) async throws {
        var headers = HTTPHeaders()
        for (name, value) in response.headers { headers.add(name: name, value: value) }
        headers.replaceOrAdd(name: "content-length", value: String(response.body.readableBytes))
        if !keepAlive { headers.replaceOrAdd(name: "connection", value: "close") }
        let head = HTTPResponseHead(version: request.version, status: response.status, headers: headers)
        let connection = channel.channel
        connection.write(HTTPServerResponsePart.head(head), promise: nil)
        if request.method != .HEAD, response.body.readableBytes > 0 {
            connection.write(HTTPServerResponsePart.body(.byteBuffer(response.body)), promise: nil)
        }
        try await connection.writeAndFlush(HTTPServerResponsePart.end(nil))
    }
}
