import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// A lean HTTP/1.1 client for the proxy's hot path: keep-alive connections pooled per event
/// loop, and each request run on the loop of the task that makes it.
///
/// A proxied call arrives on the event loop of its socket connection; sending it upstream from
/// that same loop, on a connection that lives there, saves the thread hops and the general
/// machinery a full client pays per request (most of blueskyd's added latency on a small
/// machine). It applies the same ``HTTPPolicy``, trust anchors and body limit as
/// ``OutboundHTTP``, follows no redirects, and does not pipeline.
///
/// When a kept connection turns out closed, a request goes once more to a new connection only
/// if it provably never left (the close was known before its first byte was written) or its
/// method is idempotent (GET, HEAD, OPTIONS, TRACE, PUT, DELETE). A procedure that may have
/// reached the server fails with ``HTTPError/mayHaveBeenReceived(_:)`` instead: sending a
/// `createRecord` twice would create two records.
public final class KeepAliveHTTPClient: HTTPFetching {
    public struct Configuration: Sendable {
        public var policy: HTTPPolicy
        /// PEM file of extra certificate authorities, trusted besides the system's.
        public var extraCAFile: String?
        public var connectTimeout: Duration
        public var maxBodyBytes: Int
        /// Idle connections kept per server and event loop.
        public var maxIdlePerOrigin: Int
        /// Connections open at once per server and event loop; more requests wait their turn.
        public var maxConnectionsPerOrigin: Int
        /// An idle connection is closed after this long (servers close theirs too).
        public var idleTimeout: Duration

        public init(policy: HTTPPolicy = HTTPPolicy(), extraCAFile: String? = nil,
                    connectTimeout: Duration = .seconds(10), maxBodyBytes: Int = 64 << 20,
                    maxIdlePerOrigin: Int = 32, maxConnectionsPerOrigin: Int = 32,
                    idleTimeout: Duration = .seconds(50)) {
            precondition(maxConnectionsPerOrigin > 0)
            self.policy = policy
            self.extraCAFile = extraCAFile
            self.connectTimeout = connectTimeout
            self.maxBodyBytes = maxBodyBytes
            self.maxIdlePerOrigin = maxIdlePerOrigin
            self.maxConnectionsPerOrigin = maxConnectionsPerOrigin
            self.idleTimeout = idleTimeout
        }
    }

    public let configuration: Configuration
    private let group: MultiThreadedEventLoopGroup
    private let pools: [(loop: ObjectIdentifier, pool: HTTP1LoopPool)]

    public init(_ configuration: Configuration = Configuration(),
                group: MultiThreadedEventLoopGroup = .singleton) throws {
        self.configuration = configuration
        self.group = group
        let context = try NIOSSLContext(
            configuration: TrustRoots.clientConfiguration(extraCAFile: configuration.extraCAFile))
        let limits = HTTP1LoopPool.Limits(
            connectTimeout: TimeAmount(configuration.connectTimeout),
            idleTimeout: TimeAmount(configuration.idleTimeout),
            maxIdlePerOrigin: configuration.maxIdlePerOrigin,
            maxConnectionsPerOrigin: configuration.maxConnectionsPerOrigin)
        pools = group.makeIterator().map { loop in
            (ObjectIdentifier(loop), HTTP1LoopPool(loop: loop, tls: context, limits: limits))
        }
    }

    public func send(_ request: OutboundRequest, timeout: Duration) async throws(HTTPError) -> InboundResponse {
        let url = try configuration.policy.check(request.url)
        guard let origin = HTTP1Origin(url) else { throw .invalidURL(url.absoluteString) }
        let head = Self.head(for: request, url: url, origin: origin)
        let body = request.body.map { ByteBuffer(bytes: $0) }
        let pool = currentPool()
        let limit = configuration.maxBodyBytes
        let future: EventLoopFuture<InboundResponse> =
            if pool.loop.inEventLoop {
                pool.execute(origin: origin, head: head, body: body, maxBodyBytes: limit, timeout: TimeAmount(timeout))
            } else {
                pool.loop.flatSubmit {
                    pool.execute(origin: origin, head: head, body: body, maxBodyBytes: limit, timeout: TimeAmount(timeout))
                }
            }
        do {
            return try await future.get()
        } catch {
            throw Self.httpError(error, url: url, method: head.method, limit: limit)
        }
    }

    /// Closes every idle connection; call once at shutdown.
    public func shutdown() async {
        for (_, pool) in pools {
            try? await pool.loop.submit { pool.shutdown() }.get()
        }
    }

    /// The pool of the loop this task runs on; callers off the group's loops share the first
    /// pool, so that they share its connections too.
    private func currentPool() -> HTTP1LoopPool {
        if let loop = MultiThreadedEventLoopGroup.currentEventLoop {
            let id = ObjectIdentifier(loop)
            if let match = pools.first(where: { $0.loop == id }) { return match.pool }
        }
        return pools[0].pool
    }

    static func head(for request: OutboundRequest, url: URL, origin: HTTP1Origin) -> HTTPRequestHead {
        var headers = HTTPHeaders()
        headers.reserveCapacity(request.headers.count + 3)
        headers.add(name: "Host", value: origin.hostHeader)
        headers.add(name: "User-Agent", value: "blueskyd")
        for (name, value) in request.headers { headers.add(name: name, value: value) }
        if let body = request.body {
            headers.add(name: "Content-Length", value: String(body.count))
        }
        return HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: request.method),
                               uri: HTTP1Origin.requestTarget(of: url), headers: headers)
    }

    static func httpError(_ error: any Error, url: URL, method: HTTPMethod, limit: Int) -> HTTPError {
        let shown = OutboundHTTP.redacted(url)
        switch error as? HTTP1ExchangeFailure {
        case .timedOut: return .timedOut(shown)
        case .bodyTooLarge: return .bodyTooLarge(shown, limit: limit)
        case .notSent: return .unreachable(shown, reason: "the server closed the connection before the request was sent")
        case .closedBeforeResponse where !method.isIdempotent: return .mayHaveBeenReceived(shown)
        case .closedBeforeResponse: return .unreachable(shown, reason: "the server closed the connection")
        case .closedMidResponse: return .unreachable(shown, reason: "the server closed the connection mid-answer")
        case .transport(let underlying): return .unreachable(shown, reason: String(describing: underlying))
        case nil: return .unreachable(shown, reason: String(describing: error))
        }
    }
}
