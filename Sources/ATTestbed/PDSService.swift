import Foundation
import JSONRPC
import NIOHTTP1

/// An XRPC error answer: status plus `{"error", "message"}`.
struct XRPCError: Error {
    let status: HTTPResponseStatus
    let name: String
    let message: String?
    /// Extra headers, e.g. `WWW-Authenticate` on DPoP refusals.
    var headers: HTTPHeaders = [:]

    init(_ status: HTTPResponseStatus, _ name: String, _ message: String? = nil, headers: HTTPHeaders = [:]) {
        self.status = status
        self.name = name
        self.message = message
        self.headers = headers
    }

    static func invalidRequest(_ message: String) -> XRPCError { XRPCError(.badRequest, "InvalidRequest", message) }

    var response: TestbedResponse {
        var response = TestbedResponse.xrpcError(status, name, message)
        for (name, value) in headers { response.headers.replaceOrAdd(name: name, value: value) }
        return response
    }
}

/// The PDS at `pds.<domain>`: XRPC dispatch, counting, injected failures and rate-limit headers.
struct PDSService: Sendable {
    let context: TestbedContext
    let identity: IdentityEndpoints

    private enum Kind: String { case query, procedure }

    func handle(_ request: TestbedRequest) -> TestbedResponse {
        guard request.path.hasPrefix("/xrpc/") else {
            if request.path == "/" { return .text("atproto testbed PDS\n") }
            if request.path == "/.well-known/oauth-protected-resource" { return protectedResourceMetadata(request) }
            return .xrpcError(.notFound, "NotFound", "Not Found")
        }
        // Routed as the reference PDS routes, through Express: paths match whatever their case.
        let nsid = Self.routed(String(request.path.dropFirst("/xrpc/".count)))
        if nsid == "_health" { return .json(["version": "testbed"]) }

        let now = context.clock.now()
        let proxied = request.headers.first(name: "atproto-proxy") != nil
        let (remaining, windowResetAt) = context.metrics.record(nsid: nsid, proxied: proxied, now: now)
        var response: TestbedResponse
        var retryAfter: Int?
        var resetAt = windowResetAt
        if let failure = context.failures.take(nsid: nsid) {
            let status = HTTPResponseStatus(statusCode: failure.status)
            let name = failure.errorName ?? FailureInjector.errorName(status: failure.status)
            response = failure.html
                ? .html(status: status)
                : .xrpcError(status, name, "injected failure (\(failure.status) \(status.reasonPhrase))")
            retryAfter = failure.retryAfterSeconds
            if let retryAfter, failure.status == 429 { resetAt = Int64(now.timeIntervalSince1970) + Int64(retryAfter) }
        } else {
            do {
                response = try dispatch(nsid: nsid, request)
            } catch {
                response = error.response
            }
        }
        let limited = response.status == .tooManyRequests
        response.headers.replaceOrAdd(name: "RateLimit-Limit", value: String(RequestMetrics.rateLimit))
        response.headers.replaceOrAdd(name: "RateLimit-Remaining", value: limited ? "0" : String(remaining))
        response.headers.replaceOrAdd(name: "RateLimit-Reset", value: String(resetAt))
        response.headers.replaceOrAdd(
            name: "RateLimit-Policy", value: "\(RequestMetrics.rateLimit);w=\(RequestMetrics.rateWindowSeconds)")
        if let retryAfter { response.headers.replaceOrAdd(name: "Retry-After", value: String(retryAfter)) }
        // Only DPoP clients get nonces; the app-password path stays as it was.
        if request.headers.contains(name: "dpop") {
            response.headers.replaceOrAdd(name: "DPoP-Nonce", value: context.oauth.pdsNonces.issue())
        }
        return response
    }

    /// The methods served, each under the one spelling `dispatch` knows.
    static let methods = [
        "com.atproto.server.describeServer", "com.atproto.server.createSession", "com.atproto.server.refreshSession",
        "com.atproto.server.getSession", "com.atproto.server.getServiceAuth", "com.atproto.server.deleteSession",
        "com.atproto.identity.resolveHandle", "com.atproto.repo.createRecord", "com.atproto.repo.putRecord",
        "com.atproto.repo.getRecord", "com.atproto.repo.listRecords", "com.atproto.repo.deleteRecord",
        "com.atproto.repo.uploadBlob", "com.atproto.sync.getBlob", "app.bsky.actor.getProfile", "app.bsky.feed.getTimeline",
    ]
    private static let routes = Dictionary(methods.map { ($0.lowercased(), $0) }, uniquingKeysWith: { first, _ in first })

    /// The method `written` reaches: Express compares route paths without regard to case.
    static func routed(_ written: String) -> String { routes[written.lowercased()] ?? written }

    private func dispatch(nsid: String, _ request: TestbedRequest) throws(XRPCError) -> TestbedResponse {
        switch nsid {
        case "com.atproto.server.describeServer":
            try expect(.query, request)
            return describeServer()
        case "com.atproto.server.createSession":
            try expect(.procedure, request)
            return try createSession(request)
        case "com.atproto.server.refreshSession":
            try expect(.procedure, request)
            return try refreshSession(request)
        case "com.atproto.server.getSession":
            try expect(.query, request)
            return try getSession(request)
        case "com.atproto.server.getServiceAuth":
            try expect(.query, request)
            return try getServiceAuth(request)
        case "com.atproto.server.deleteSession":
            try expect(.procedure, request)
            return try deleteSession(request)
        case "com.atproto.identity.resolveHandle":
            try expect(.query, request)
            return try resolveHandle(request)
        case "com.atproto.repo.createRecord":
            try expect(.procedure, request)
            return try createRecord(request)
        case "com.atproto.repo.putRecord":
            try expect(.procedure, request)
            return try putRecord(request)
        case "com.atproto.repo.getRecord":
            try expect(.query, request)
            return try getRecord(request)
        case "com.atproto.repo.listRecords":
            try expect(.query, request)
            return try listRecords(request)
        case "com.atproto.repo.deleteRecord":
            try expect(.procedure, request)
            return try deleteRecord(request)
        case "com.atproto.repo.uploadBlob":
            try expect(.procedure, request)
            return try uploadBlob(request)
        case "com.atproto.sync.getBlob":
            try expect(.query, request)
            return try getBlob(request)
        case "app.bsky.actor.getProfile":
            try expect(.query, request)
            return try getProfile(request)
        case "app.bsky.feed.getTimeline":
            try expect(.query, request)
            return try getTimeline(request)
        default:
            return .xrpcError(HTTPResponseStatus(statusCode: 501), "MethodNotImplemented", "Method Not Implemented")
        }
    }

    private func expect(_ kind: Kind, _ request: TestbedRequest) throws(XRPCError) {
        let allowed: Bool =
            switch kind {
            case .query: request.method == .GET || request.method == .HEAD
            case .procedure: request.method == .POST
            }
        guard allowed else {
            let expected = kind == .query ? "GET" : "POST"
            throw .invalidRequest("Incorrect HTTP method (\(request.method.rawValue)) expected \(expected)")
        }
    }

    /// The JSON object body of a procedure.
    func jsonBody(_ request: TestbedRequest) throws(XRPCError) -> [String: JSONValue] {
        guard let object = (try? JSONValue.parse(request.body.readableBytesView))?.objectValue else {
            throw .invalidRequest("Request body must be a JSON object")
        }
        return object
    }

    func requiredString(_ name: String, in object: [String: JSONValue]) throws(XRPCError) -> String {
        guard let value = object[name]?.stringValue else {
            throw .invalidRequest("Input must have the property \"\(name)\"")
        }
        return value
    }

    func requiredParameter(_ name: String, _ request: TestbedRequest) throws(XRPCError) -> String {
        guard let value = request.query[name], !value.isEmpty else {
            throw .invalidRequest("Error: Params must have the property \"\(name)\"")
        }
        return value
    }

    /// `limit` as the lexicons define it: 1...100, default 50.
    func limitParameter(_ request: TestbedRequest) throws(XRPCError) -> Int {
        guard let text = request.query["limit"] else { return 50 }
        guard let limit = Int(text), (1...100).contains(limit) else {
            throw .invalidRequest("Error: limit must be an integer between 1 and 100")
        }
        return limit
    }
}
