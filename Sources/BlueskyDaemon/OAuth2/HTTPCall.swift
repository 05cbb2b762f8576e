import ATPermissions
import Foundation
import JSONRPC
import WebBasics

/// One call to an OAuth 2.0 server's account (`http.call`, or the gateway's
/// `/http/<account>/<path>`): a method and a path on the account's own server, with the
/// caller's query, headers and body. blueskyd adds the bearer token; the call never leaves the
/// account's origin (the path is a path, not a URL, and redirects are passed back, not followed).
struct HTTPCall: Sendable {
    var account: String?
    /// Upper case (`GET`, `POST`…).
    var method: String
    /// Starts with `/`; no `.` or `..` segment, no `//`: what a policy's prefix is matched against.
    var path: String
    /// The query as the caller wrote it, without `?` (nil: none).
    var query: String?
    var headers: [(String, String)]
    var body: [UInt8]?

    /// The body was not read whole: it is passed on as it arrives (chunked, or past the
    /// gateway's whole-body limit), so nothing in it can be looked at before it is sent.
    var bodyIsStreamed = false

    /// Where the request asks a server to take it as another method, if it does: `_method` in
    /// the query, or as a key of a form, JSON or multipart body, however escaped (Rails,
    /// Laravel and Symfony honour each). A policy granting POST must not grant DELETE.
    var methodOverride: String? { MethodOverride.find(query: query, body: body) }
    /// A write that may have changed the account's profile (Mastodon's `update_credentials`, a
    /// `/me` or profile endpoint): a cheap look, a false positive costing one fetch.
    var mayWriteProfile: Bool {
        guard isWrite else { return false }
        let lowered = path.lowercased()
        return lowered.contains("credentials") || lowered.contains("profile") || lowered.hasSuffix("/me")
    }

    /// The methods sent; anything else is refused before a policy is asked.
    static let methods: Set<String> = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

    /// What a client policy must grant for it.
    var need: PermissionNeed { .http(method: method, path: path) }
    var isWrite: Bool {
        switch method {
        case "GET", "HEAD", "OPTIONS": false
        default: true
        }
    }

    /// Headers a caller may not set: the credentials are blueskyd's, the framing is the client's
    /// connection's, and a cookie of the caller's is no business of the server's account.
    /// So are method and path overrides (a Rails server takes `X-HTTP-Method-Override: DELETE` on
    /// a POST, some proxies `X-Original-URL`): a policy judges the method and path it sees.
    /// `Accept-Encoding` too: blueskyd reads answers as they are, so it asks for them unencoded.
    static let droppedHeaders: Set<String> = [
        "authorization", "cookie", "host", "content-length", "connection", "transfer-encoding", "te", "upgrade",
        "keep-alive", "expect", "dpop", "proxy-authorization", "proxy-connection", "atproto-account",
        "x-http-method-override", "x-http-method", "x-method-override", "x-original-url", "x-rewrite-url", "forwarded",
        "accept-encoding",
    ]

    /// The server's answer headers passed back to the caller.
    static let answerHeaders: Set<String> = [
        "content-type", "location", "link", "retry-after", "etag", "last-modified", "cache-control", "www-authenticate",
        "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "ratelimit-limit", "ratelimit-remaining",
        "ratelimit-reset", "content-language", "content-range", "accept-ranges", "content-disposition",
    ]

    init(account: String?, method: String, path: String, query: String?, headers: [(String, String)], body: [UInt8]?) throws(DaemonError) {
        let method = method.utf8.contains(where: { $0 >= 0x61 && $0 <= 0x7A }) ? method.uppercased() : method
        // A fixed set: TRACE would echo the bearer token back, CONNECT asks for a tunnel.
        guard Self.methods.contains(method) else {
            throw .invalidParams("method must be one of \(Self.methods.sorted().joined(separator: ", "))", field: "method")
        }
        self.account = account
        self.method = method
        self.path = try Self.normalised(path)
        if let query, query.utf8.contains(where: { $0 <= 0x20 || $0 == UInt8(ascii: "#") || $0 >= 0x7F }) {
            throw .invalidParams("query must be URL-encoded (no spaces, '#' or control characters)", field: "query")
        }
        self.query = query.flatMap { $0.isEmpty ? nil : ($0.hasPrefix("?") ? String($0.dropFirst()) : $0) }
        var kept: [(String, String)] = []
        for (name, value) in headers {
            let lowered = name.utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) ? name.lowercased() : name
            guard !lowered.isEmpty, lowered.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") }),
                  XRPCCall.isHeaderSafe(value) else {
                throw .invalidParams("header '\(name.prefix(64))' is not a header name with a value a header can hold", field: "headers")
            }
            if Self.droppedHeaders.contains(lowered) || lowered.hasPrefix("proxy-") || lowered.hasPrefix("x-forwarded-") { continue }
            kept.append((lowered, value))
        }
        self.headers = kept
        self.body = body
    }

    /// The path as sent and as policies see it. Percent-escapes of `/` and `.` are refused (a
    /// server may decode them into a path a prefix rule did not mean), as are `.`/`..` segments
    /// and empty ones.
    static func normalised(_ path: String) throws(DaemonError) -> String {
        func refuse(_ why: String) -> DaemonError { .invalidParams("path \(why)", field: "path") }
        let bytes = path.utf8
        guard bytes.first == UInt8(ascii: "/") else { throw refuse("must start with / (a path on the account's server, not a URL)") }
        guard bytes.count <= 4_096 else { throw refuse("is longer than 4096 bytes") }
        // One pass: each segment (between slashes) is checked as it ends.
        var segmentLength = 0, dots = 0, escapes = false, inParameters = false
        var index = bytes.startIndex
        while index != bytes.endIndex {
            let byte = bytes[index]
            switch byte {
            case 0...0x20, 0x7F...0xFF, UInt8(ascii: "?"), UInt8(ascii: "#"), UInt8(ascii: "\\"):
                throw refuse("must be URL-encoded, without a query ('?': use query) or fragment")
            case UInt8(ascii: "%"):
                escapes = true
            default:
                break
            }
            if byte == UInt8(ascii: "/") {
                if index != bytes.startIndex {
                    if segmentLength == 0 { throw refuse("may not hold '//'") }
                    if dots == segmentLength, dots <= 2 { throw refuse("may not hold '.' or '..' segments") }
                }
                segmentLength = 0
                dots = 0
                inParameters = false
            } else if inParameters {
                // After ';' (a path parameter): what some servers ignore (`..;/`), as if absent.
            } else if byte == UInt8(ascii: ";") {
                inParameters = true
            } else {
                segmentLength += 1
                if byte == UInt8(ascii: ".") { dots += 1 }
            }
            index = bytes.index(after: index)
        }
        if segmentLength > 0, dots == segmentLength, dots <= 2 { throw refuse("may not hold '.' or '..' segments") }
        guard escapes else { return path }
        // A server may decode an escaped '/', '.' or '\\' into a path a prefix rule did not mean.
        let lowered = path.lowercased()
        guard !lowered.contains("%2f"), !lowered.contains("%2e"), !lowered.contains("%5c") else {
            throw refuse("may not escape '/', '.' or '\\'")
        }
        guard PercentDecoding.decode(path[...], plusIsSpace: false) != nil else { throw refuse("holds a broken %-escape") }
        return path
    }

    /// From `http.call`'s params: `{account, method, path, query, headers, body, bodyBase64}`.
    init(params: Params) throws(DaemonError) {
        try params.allowOnly(["account", "method", "path", "query", "headers", "body", "bodyBase64"])
        var headers: [(String, String)] = []
        for (name, value) in try params.optionalObject("headers") ?? [:] {
            guard let text = value.stringValue else { throw .invalidParams("each header's value must be a string", field: "headers") }
            headers.append((name, text))
        }
        var query: String?
        if let text = params.value("query")?.stringValue {
            query = text
        } else if let value = params.value("query"), value != .null {
            guard let object = value.objectValue else {
                throw .invalidParams("query must be a URL-encoded string or an object of name → value(s)", field: "query")
            }
            // An object of name → string (or list of strings), percent-encoded here.
            var pairs: [String] = []
            for (name, value) in object.sorted(by: { $0.key < $1.key }) {
                for item in value.arrayValue ?? [value] {
                    guard let text = Self.queryText(item) else {
                        throw .invalidParams("query.\(name) must be a string, number or boolean, or a list of them", field: "query")
                    }
                    pairs.append(Self.encode(name) + "=" + Self.encode(text))
                }
            }
            query = pairs.joined(separator: "&")
        }
        var body: [UInt8]?
        if params.value("body") != nil, params.value("bodyBase64") != nil {
            throw .invalidParams("give body (JSON) or bodyBase64 (bytes), not both", field: "body")
        }
        switch (params.value("body"), try params.optionalString("bodyBase64")) {
        case (let json?, nil) where json != .null:
            body = json.encoded()
            if !headers.contains(where: { $0.0.lowercased() == "content-type" }) { headers.append(("content-type", "application/json")) }
        case (_, let base64?):
            guard let data = Data(base64Encoded: base64) else { throw .invalidParams("bodyBase64 is not base64", field: "bodyBase64") }
            body = Array(data)
        default:
            body = nil
        }
        try self.init(account: try params.optionalString("account"), method: try params.optionalString("method") ?? "GET",
                      path: try params.requiredString("path"), query: query, headers: headers, body: body)
    }

    /// A query value as text: strings as they are, numbers in decimal, booleans as true/false.
    private static func queryText(_ value: JSONValue) -> String? {
        if let text = value.stringValue { return text }
        if let bool = value.boolValue { return bool ? "true" : "false" }
        if let number = value.doubleValue {
            return number == number.rounded() && abs(number) < 1e15 ? String(Int64(number)) : String(number)
        }
        return nil
    }

    private static func encode(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }

    /// The URL on the account's server: its origin, this path and query; nil if that would
    /// name another host (it cannot, the path being checked: a second guard).
    func url(origin: URL) -> URL? {
        var text = origin.absoluteString
        if text.hasSuffix("/") { text.removeLast() }
        text += path
        if let query { text += "?" + query }
        guard let url = URL(string: text), url.host == origin.host, url.port == origin.port else { return nil }
        return url
    }
}
