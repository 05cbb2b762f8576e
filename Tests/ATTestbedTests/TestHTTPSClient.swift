import ATTestbed
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// One response as the test client saw it.
struct TestResponse: Sendable {
    let status: Int
    let headers: HTTPHeaders
    let body: [UInt8]

    var text: String { String(decoding: body, as: UTF8.self) }

    /// The body as a JSON object (empty when it is not one).
    var json: [String: any Sendable] {
        ((try? JSONSerialization.jsonObject(with: Data(body))) as? [String: any Sendable]) ?? [:]
    }

    subscript(key: String) -> String? { json[key] as? String }

    var errorName: String? { self["error"] }
}

/// A minimal HTTPS/1.1 client for the testbed: TLS verified against the testbed CA with the
/// virtual host as SNI and hostname, one keep-alive connection, requests may be pipelined.
final class TestHTTPSConnection: Sendable {
    let host: String
    private let channel: any Channel
    private let collector: NIOLoopBound<ResponseCollector>

    private init(host: String, channel: any Channel, collector: NIOLoopBound<ResponseCollector>) {
        self.host = host
        self.channel = channel
        self.collector = collector
    }

    /// Connects to the testbed's address; `trusting` is the CA file to verify against (the
    /// testbed's own by default).
    static func open(_ testbed: Testbed, host: String, trusting caFile: String? = nil) async throws
        -> TestHTTPSConnection
    {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(caFile ?? testbed.caFile)
        let sslContext = try NIOSSLContext(configuration: tls)
        let group = MultiThreadedEventLoopGroup.singleton
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: host))
                    try pipeline.addHTTPClientHandlers()
                    try pipeline.addHandler(ResponseCollector())
                }
            }
            .connect(host: testbed.configuration.bindAddress, port: testbed.port)
            .get()
        let collector = try await channel.eventLoop.submit {
            NIOLoopBound(try channel.pipeline.syncOperations.handler(type: ResponseCollector.self), eventLoop: channel.eventLoop)
        }.get()
        return TestHTTPSConnection(host: host, channel: channel, collector: collector)
    }

    /// Sends all requests back to back (pipelined) and returns the responses in order.
    func send(_ requests: [TestRequest]) async throws -> [TestResponse] {
        let futures = try await channel.eventLoop.submit { [channel, collector, host] in
            requests.map { request in
                let promise = channel.eventLoop.makePromise(of: TestResponse.self)
                guard collector.value.isOpen else {
                    promise.fail(ChannelError.ioOnClosedChannel)
                    return promise.futureResult
                }
                collector.value.pending.append(promise)
                var headers = request.headers
                headers.replaceOrAdd(name: "Host", value: host)
                headers.replaceOrAdd(name: "Content-Length", value: String(request.body.count))
                let head = HTTPRequestHead(version: .http1_1, method: request.method, uri: request.uri, headers: headers)
                channel.write(HTTPClientRequestPart.head(head), promise: nil)
                if !request.body.isEmpty {
                    let buffer = channel.allocator.buffer(bytes: request.body)
                    channel.write(HTTPClientRequestPart.body(.byteBuffer(buffer)), promise: nil)
                }
                channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
                return promise.futureResult
            }
        }.get()
        var responses: [TestResponse] = []
        for future in futures { responses.append(try await future.get()) }
        return responses
    }

    func send(_ request: TestRequest) async throws -> TestResponse {
        try await send([request])[0]
    }

    func close() async {
        try? await channel.close()
    }
}

struct TestRequest: Sendable {
    var method: HTTPMethod
    var uri: String
    var headers: HTTPHeaders
    var body: [UInt8]

    init(_ method: HTTPMethod, _ uri: String, headers: HTTPHeaders = [:], body: [UInt8] = []) {
        self.method = method
        self.uri = uri
        self.headers = headers
        self.body = body
    }

    static func get(_ uri: String, bearer: String? = nil) -> TestRequest {
        var request = TestRequest(.GET, uri)
        if let bearer { request.headers.add(name: "Authorization", value: "Bearer \(bearer)") }
        return request
    }

    static func post(_ uri: String, json: [String: any Sendable]? = nil, bearer: String? = nil) -> TestRequest {
        var request = TestRequest(.POST, uri)
        if let json {
            request.body = Array(try! JSONSerialization.data(withJSONObject: json))
            request.headers.add(name: "Content-Type", value: "application/json")
        }
        if let bearer { request.headers.add(name: "Authorization", value: "Bearer \(bearer)") }
        return request
    }
}

/// Collects response parts and completes the oldest pending request on each `.end`.
final class ResponseCollector: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart

    var pending: [EventLoopPromise<TestResponse>] = []
    private(set) var isOpen = true
    private var head: HTTPResponseHead?
    private var body: [UInt8] = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let responseHead):
            head = responseHead
            body = []
        case .body(let chunk):
            body.append(contentsOf: chunk.readableBytesView)
        case .end:
            guard let responseHead = head, !pending.isEmpty else { return }
            pending.removeFirst().succeed(
                TestResponse(status: Int(responseHead.status.code), headers: responseHead.headers, body: body))
            head = nil
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failAll(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        isOpen = false
        failAll(ChannelError.ioOnClosedChannel)
        context.fireChannelInactive()
    }

    private func failAll(_ error: any Error) {
        let failing = pending
        pending = []
        failing.forEach { $0.fail(error) }
    }
}
