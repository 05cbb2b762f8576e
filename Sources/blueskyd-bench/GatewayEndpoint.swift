import NIOCore
import NIOHTTP1
import NIOPosix

/// A request for the gateway and the promise its answer completes (true for status 200).
struct PendingGatewayRequest: Sendable {
    let head: HTTPRequestHead
    let answer: EventLoopPromise<Bool>
}

/// Sends requests on one keep-alive HTTP/1.1 connection and completes their promises in
/// order as the answers end (the gateway answers a connection's requests in order).
final class GatewayAnswerHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = PendingGatewayRequest
    typealias OutboundOut = HTTPClientRequestPart

    private let waiting = PendingAnswers<Bool>()
    private var status: HTTPResponseStatus?

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let request = unwrapOutboundIn(data)
        waiting.append(request.answer)
        context.write(wrapOutboundOut(.head(request.head)), promise: nil)
        context.write(wrapOutboundOut(.end(nil)), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): status = head.status
        case .body: break
        case .end:
            waiting.succeedFirst(status == .ok)
            status = nil
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        waiting.failAll(ChannelError.eof)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        waiting.failAll(error)
        context.close(promise: nil)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        waiting.failAll(ChannelError.ioOnClosedChannel)
    }
}

/// One keep-alive connection to blueskyd's XRPC gateway, sending the benchmark's call (the
/// same `getProfile` the direct and JSON-RPC sides make) for one account.
struct GatewayEndpoint: BenchEndpoint {
    let channel: any Channel
    let head: HTTPRequestHead

    static func connect(socketPath: String, did: String, group: any EventLoopGroup) async throws -> GatewayEndpoint {
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: group)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(GatewayAnswerHandler())
                    }
                }
                .connect(unixDomainSocketPath: socketPath).get()
        } catch {
            throw BenchError.connectionFailed("\(socketPath): \(describe(error))")
        }
        let headers = HTTPHeaders([("Host", "localhost"), ("atproto-account", did)])
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/xrpc/\(benchNSID)?actor=\(did)", headers: headers)
        return GatewayEndpoint(channel: channel, head: head)
    }

    /// A connection sending `GET <uri>` (an OAuth 2.0 account's `/http/<account>/<path>`).
    static func connect(socketPath: String, uri: String, group: any EventLoopGroup) async throws -> GatewayEndpoint {
        let endpoint = try await connect(socketPath: socketPath, did: "-", group: group)
        return GatewayEndpoint(channel: endpoint.channel,
                               head: HTTPRequestHead(version: .http1_1, method: .GET, uri: uri, headers: HTTPHeaders([("Host", "localhost")])))
    }

    func callOnce() -> EventLoopFuture<Bool> {
        let answer = channel.eventLoop.makePromise(of: Bool.self)
        let written = channel.eventLoop.makePromise(of: Void.self)
        written.futureResult.whenFailure { answer.fail($0) }
        channel.writeAndFlush(PendingGatewayRequest(head: head, answer: answer), promise: written)
        return answer.futureResult
    }

    func close() async {
        try? await channel.close()
    }
}
