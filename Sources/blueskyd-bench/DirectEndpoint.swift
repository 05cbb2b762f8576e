import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL

/// Something the benchmark calls: one request, completing with whether the upstream said 200.
protocol BenchEndpoint: Sendable {
    func callOnce() -> EventLoopFuture<Bool>
}

/// The same XRPC call made straight to the PDS over HTTPS with the held access token.
struct DirectEndpoint: DirectBenchEndpoint {
    let client: HTTPClient
    let request: HTTPClient.Request
    /// `.indifferent` under load; pinned to one loop for latency, like the daemon connection.
    var preference: HTTPClient.EventLoopPreference = .indifferent

    func callOnce() -> EventLoopFuture<Bool> {
        client.execute(request: request, eventLoop: preference).map { $0.status == .ok }
    }

    func pinned(to loop: any EventLoop) -> DirectEndpoint {
        var pinned = self
        pinned.preference = .delegateAndChannel(on: loop)
        return pinned
    }
}

/// The benchmark's own HTTPS client: trusts the testbed CA, HTTP/1.1, one pooled connection
/// per request in flight.
enum DirectClient {
    static func make(caFile: String, connections: Int, group: any EventLoopGroup) throws -> HTTPClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(caFile))
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls, redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(10), read: .seconds(30)))
        configuration.httpVersion = .http1Only
        configuration.connectionPool = .init(
            idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: connections)
        return HTTPClient(eventLoopGroupProvider: .shared(group), configuration: configuration)
    }

    /// Logs in with `com.atproto.server.createSession` and returns the access token.
    static func createSession(client: HTTPClient, upstream: UpstreamInfo) async throws -> String {
        let body = try JSONSerialization.data(withJSONObject: [
            "identifier": upstream.did, "password": upstream.appPassword,
        ])
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        let request = try HTTPClient.Request(
            url: upstream.pdsURL + "/xrpc/com.atproto.server.createSession", method: .POST,
            headers: headers, body: .data(body))
        let response: HTTPClient.Response
        do {
            response = try await client.execute(request: request).get()
        } catch {
            throw BenchError.loginFailed(describe(error))
        }
        guard response.status == .ok, let buffer = response.body,
              let object = try? JSONSerialization.jsonObject(with: Data(buffer.readableBytesView)) as? [String: Any],
              let token = object["accessJwt"] as? String
        else {
            throw BenchError.loginFailed("status \(response.status.code)")
        }
        return token
    }

    /// `GET <pds>/xrpc/<nsid>?actor=<did>` with the bearer token.
    static func profileRequest(upstream: UpstreamInfo, accessToken: String) throws -> HTTPClient.Request {
        var headers = HTTPHeaders()
        headers.add(name: "Authorization", value: "Bearer \(accessToken)")
        return try HTTPClient.Request(
            url: upstream.pdsURL + "/xrpc/\(benchNSID)?actor=\(upstream.did)", method: .GET, headers: headers)
    }
}

/// The XRPC method every proxied and direct call uses.
let benchNSID = "app.bsky.actor.getProfile"
