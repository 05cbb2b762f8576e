import BlueskyHTTP
import Foundation
import JSONRPC

/// Makes `HTTPCall`s for OAuth 2.0 servers' accounts: the bearer token added, the account's own
/// origin only, one refresh and one resend when the server refuses the token.
struct HTTPCallProxy: Sendable {
    /// Its accounts, environment, refused-token hook and streaming client: the XRPC proxy's.
    let proxy: XRPCProxy

    init(_ proxy: XRPCProxy) {
        self.proxy = proxy
    }

    var registry: AccountRegistry { proxy.registry }
    var environment: SessionEnvironment { proxy.environment }

    /// - Parameter upstream: collects the time spent with the server (the metrics' added latency).
    func send(_ call: HTTPCall, upstream: UpstreamTime? = nil) async throws(DaemonError) -> InboundResponse {
        let session = try registry.session(call.account)
        let target = try await session.liveHTTPTarget()
        guard let url = call.url(origin: target.origin) else {
            throw .invalidParams("path and query do not make a URL on \(target.origin.absoluteString)", field: "path")
        }
        let response = try await send(call, url: url, token: target.token, upstream: upstream)
        // A refused token (revoked early, or expired ahead of its stated life): refresh once and
        // send again; the body is held whole, so the resend is the same request.
        guard response.status == 401, target.refreshable, await Self.meansExpired(response.header("WWW-Authenticate"), session: session)
        else { return response }
        let fresh = try await session.replaceExpired(token: target.token)
        guard fresh != target.token else { return response }
        proxy.tokenRefused(session)
        return try await send(call, url: url, token: fresh, upstream: upstream)
    }

    /// A call whose body is passed on as it arrives (an upload past the gateway's whole-body
    /// limit), and whose answer comes back the same way. Read as it was sent, the body cannot be
    /// sent twice: when the server refuses the token, the token is replaced (for the caller's
    /// next try) and the 401 goes back as it came.
    func sendStreamed(_ call: HTTPCall, upload: ChunkSource) async throws(DaemonError) -> StreamedAnswer {
        guard let streaming = proxy.streaming else { throw .internalError("no client for streamed calls") }
        let session = try registry.session(call.account)
        let target = try await session.liveHTTPTarget()
        guard let url = call.url(origin: target.origin) else {
            throw .invalidParams("path and query do not make a URL on \(target.origin.absoluteString)", field: "path")
        }
        let request = OutboundRequest(method: call.method, url: url, headers: call.headers + [("Authorization", "Bearer " + target.token)])
        let answer: StreamedAnswer
        do {
            answer = try await streaming.stream(request, upload: upload, timeout: environment.upstreamTimeout)
        } catch {
            throw .upstreamUnavailable(error.description)
        }
        if answer.status == 401, target.refreshable, await Self.meansExpired(answer.header("WWW-Authenticate"), session: session),
           (try? await session.replaceExpired(token: target.token)) != nil {
            proxy.tokenRefused(session)
        }
        return answer
    }

    private func send(_ call: HTTPCall, url: URL, token: String, upstream: UpstreamTime?) async throws(DaemonError) -> InboundResponse {
        let started = upstream.map { _ in ContinuousClock.now }
        defer { if let upstream, let started { upstream.add(ContinuousClock.now - started) } }
        let request = OutboundRequest(method: call.method, url: url, headers: call.headers + [("Authorization", "Bearer " + token)],
                                      body: call.body)
        do {
            return try await environment.http.send(request, timeout: environment.upstreamTimeout)
        } catch {
            throw .upstreamUnavailable(error.description)
        }
    }

    /// Whether a 401 says the token is no longer good (so a refresh may help): RFC 6750's
    /// `invalid_token`; or no reason at all from a server that gives none, for a token old enough
    /// that it may have expired early. Another reason (`insufficient_scope`), or a reasonless 401
    /// for a token a minute old, spends no refresh token: a caller looping on an endpoint that
    /// refuses for its own reasons must not rotate the account's tokens on every call.
    static func meansExpired(_ wwwAuthenticate: String?, session: AccountSession) async -> Bool {
        refreshMayHelp(wwwAuthenticate: wwwAuthenticate, tokenAge: await session.tokenAge)
    }

    static func refreshMayHelp(wwwAuthenticate: String?, tokenAge: TimeInterval) -> Bool {
        if let header = wwwAuthenticate?.lowercased(), header.contains("error=") {
            return header.contains("invalid_token")
        }
        return tokenAge >= minimumAgeForReasonlessRefresh
    }

    static let minimumAgeForReasonlessRefresh: TimeInterval = 60

    /// `http.call`'s answer: `{status, headers, contentType, body | bodyBase64}`, a JSON body
    /// passed on as the server wrote it.
    static func result(of response: InboundResponse) -> JSONValue {
        var fields: [String: JSONValue] = ["status": .number(Double(response.status))]
        var headers: [String: JSONValue] = [:]
        for (name, value) in passedHeaders(response.headers) where headers[name] == nil { headers[name] = .string(value) }
        fields["headers"] = .object(headers)
        XRPCProxy.addBody(of: response, to: &fields)
        return .object(fields)
    }

    /// The server's headers a caller may read (lower-cased): never its cookies.
    static func passedHeaders(_ headers: [(String, String)]) -> [(String, String)] {
        headers.compactMap { name, value in
            let lowered = name.utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5A })
                ? String(decoding: name.utf8.map(InboundResponse.asciiLowercased), as: UTF8.self) : name
            return HTTPCall.answerHeaders.contains(lowered) ? (lowered, value) : nil
        }
    }
}
