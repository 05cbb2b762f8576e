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
    /// every byte of the body. async-http-client's own deadline ends at the head, so a server
    /// that stalls after it would otherwise hold the caller (a refresh, a login) for as long as
    /// it likes; here the exchange is cancelled at the deadline, which closes its connection.
    public func send(_ request: OutboundRequest, timeout: Duration) async throws(HTTPError) -> InboundResponse {
        let url = try configuration.policy.check(request.url)
        var outbound = HTTPClientRequest(url: url.absoluteString)
        outbound.method = HTTPMethod(rawValue: request.method)
        for (name, value) in request.headers { outbound.headers.add(name: name, value: value) }
        if let body = request.body {
            outbound.body = .bytes(ByteBuffer(bytes: body))
        }
        let (client, limit, prepared) = (client, configuration.maxBodyBytes, outbound)
        let deadline = NIODeadline.now() + TimeAmount(timeout)
        do {
            let answer = try await withThrowingTaskGroup(of: InboundResponse?.self) { group in
                group.addTask {
                    let response = try await client.execute(prepared, deadline: deadline)
                    var buffer = try await response.body.collect(upTo: limit)
                    return InboundResponse(status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
                                           body: buffer.readBytes(length: buffer.readableBytes) ?? [])
                }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    return nil
                }
                // Whichever ends first; the other is cancelled (a cancelled body read closes
                // the connection at once, so the group does not wait on the server).
                defer { group.cancelAll() }
                return try await group.next() ?? nil
            }
            guard let answer else { throw HTTPError.timedOut(Self.redacted(url)) }
            return answer
        } catch let error as HTTPError {
            throw error
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .connectTimeout || error == .readTimeout {
            throw .timedOut(Self.redacted(url))
        } catch is NIOTooManyBytesError {
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
