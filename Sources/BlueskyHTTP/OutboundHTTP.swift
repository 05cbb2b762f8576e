import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL

/// The daemon's single outbound HTTPS client: shared connection pool, extra trust anchors,
/// no redirects followed, and the ``HTTPPolicy`` applied to every URL.
public final class OutboundHTTP: HTTPFetching {
    public struct Configuration: Sendable {
        public var policy: HTTPPolicy
        /// PEM file of extra certificate authorities, trusted besides the system's.
        public var extraCAFile: String?
        public var connectTimeout: Duration
        public var maxBodyBytes: Int
        public var maxConnectionsPerHost: Int

        public init(
            policy: HTTPPolicy = HTTPPolicy(),
            extraCAFile: String? = nil,
            connectTimeout: Duration = .seconds(10),
            maxBodyBytes: Int = 64 << 20,
            maxConnectionsPerHost: Int = 64
        ) {
            self.policy = policy
            self.extraCAFile = extraCAFile
            self.connectTimeout = connectTimeout
            self.maxBodyBytes = maxBodyBytes
            self.maxConnectionsPerHost = maxConnectionsPerHost
        }
    }

    public let configuration: Configuration
    let client: HTTPClient

    public init(_ configuration: Configuration = Configuration()) throws {
        self.configuration = configuration
        let tls = try TrustRoots.clientConfiguration(extraCAFile: configuration.extraCAFile)
        var config = HTTPClient.Configuration(
            tlsConfiguration: tls,
            redirectConfiguration: .disallow,
            timeout: .init(connect: .init(configuration.connectTimeout))
        )
        config.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = configuration.maxConnectionsPerHost
        // No Accept-Encoding: XRPC answers are small, and inflating them costs more CPU per
        // proxied call than the bytes saved on a PDS link.
        config.decompression = .disabled
        self.client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: config)
    }

    /// Sends `request` and reads its whole answer within `timeout`: connecting, the head and
    /// every byte of the body. The deadline of async-http-client's future-based API covers the
    /// whole exchange (its async API's ends at the head), and past it the request fails and its
    /// connection closes, so a server that stalls after the head holds nobody for longer.
    /// The exchange runs on the connection's event loop with no task of its own: the caller
    /// waits on one future (docs/PERFORMANCE.md, "what a call costs").
    public func send(_ request: OutboundRequest, timeout: Duration) async throws(HTTPError) -> InboundResponse {
        let url = try configuration.policy.check(request.url)
        let prepared: HTTPClient.Request
        do {
            var headers = HTTPHeaders()
            headers.reserveCapacity(request.headers.count)
            for (name, value) in request.headers { headers.add(name: name, value: value) }
            prepared = try HTTPClient.Request(url: url, method: HTTPMethod(rawValue: request.method), headers: headers,
                                              body: request.body.map { .bytes($0) })
        } catch {
            throw .unreachable(Self.redacted(url), reason: String(describing: error))
        }
        // The request and its connection on one event loop: async-http-client 1.37's pool traps
        // ("a connection that we don't know was released") when a request's end is written
        // from another loop, its answer has come, and the server closes the connection before
        // the write's completion hops back (OutboundHTTPCloseRaceTests). On one loop the body and
        // its end are written at once, and the completion comes before any close is read.
        let task = client.execute(
            request: prepared, delegate: ResponseAccumulator(request: prepared, maxBodySize: configuration.maxBodyBytes),
            eventLoop: .delegateAndChannel(on: client.eventLoopGroup.next()),
            deadline: NIODeadline.now() + TimeAmount(timeout))
        do {
            let response = try await withTaskCancellationHandler {
                try await task.futureResult.get()
            } onCancel: {
                task.cancel()
            }
            var body = response.body ?? ByteBuffer()
            return InboundResponse(status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
                                   body: body.readBytes(length: body.readableBytes) ?? [])
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .connectTimeout || error == .readTimeout {
            throw .timedOut(Self.redacted(url))
        } catch is ResponseAccumulator.ResponseTooBigError {
            throw .bodyTooLarge(Self.redacted(url), limit: configuration.maxBodyBytes)
        } catch {
            throw .unreachable(Self.redacted(url), reason: String(describing: error))
        }
    }

    /// A client dropped without ``shutdown()`` (a start-up step after it failed) still stops.
    deinit {
        try? client.syncShutdown()
    }

    /// Stops the client; call once at shutdown.
    public func shutdown() async throws {
        try await client.shutdown()
    }

    /// The URL without its query, which may carry identifiers we'd rather not log.
    static func redacted(_ url: URL) -> String {
        var parts = URLComponents(url: url, resolvingAgainstBaseURL: false)
        parts?.query = nil
        return parts?.string ?? url.absoluteString
    }
}
