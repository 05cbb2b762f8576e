import JSONRPC
import NIOCore
import NIOHTTP1

/// A complete request as the router sees it (body aggregated).
struct TestbedRequest {
    let method: HTTPMethod
    /// Lower-cased host from the `Host` header, without the port.
    let host: String
    let path: String
    let query: [String: String]
    let headers: HTTPHeaders
    let body: ByteBuffer

    init(head: HTTPRequestHead, body: ByteBuffer) {
        method = head.method
        headers = head.headers
        self.body = body
        let hostHeader = head.headers.first(name: "host") ?? ""
        host = Self.stripPort(hostHeader).lowercased()
        let uri = head.uri
        if let mark = uri.firstIndex(of: "?") {
            path = String(uri[..<mark])
            query = Self.parseQuery(uri[uri.index(after: mark)...])
        } else {
            path = uri
            query = [:]
        }
    }

    var bodyBytes: [UInt8] { Array(body.readableBytesView) }

    private static func stripPort(_ host: String) -> String {
        if host.hasPrefix("[") {  // IPv6 literal
            return String(host.prefix { $0 != "]" }.dropFirst())
        }
        return String(host.prefix { $0 != ":" })
    }

    /// Every `name=value` pair in order (repeated names kept), `+` as space, escapes decoded.
    static func parsePairs(_ text: Substring) -> [(name: String, value: String)] {
        text.split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (decodeComponent(parts[0]), parts.count > 1 ? decodeComponent(parts[1]) : "")
        }
    }

    /// First value wins, `+` means space, percent-escapes decoded.
    static func parseQuery(_ text: Substring) -> [String: String] {
        var result: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = decodeComponent(parts[0])
            if result[name] == nil {
                result[name] = parts.count > 1 ? decodeComponent(parts[1]) : ""
            }
        }
        return result
    }

    static func decodeComponent(_ text: Substring) -> String {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "+"): bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                if let high = iterator.next(), let low = iterator.next(),
                    let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
                {
                    bytes.append(value)
                }
            default: bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// A complete response; the server adds `Content-Length` and connection handling.
struct TestbedResponse {
    var status: HTTPResponseStatus
    var headers: HTTPHeaders
    var body: [UInt8]
    /// Close the connection instead of answering: the request took effect on the server, but
    /// the client never learns the outcome (a lost response).
    var dropsConnection = false
    /// Answer only after this long (the change already made): a slow server, and the window in
    /// which a client that dies has lost the answer.
    var delay: Duration?
    /// Send the head (announcing the whole body) and half the body, then nothing for this long,
    /// then close: a server or proxy that stalls mid-answer.
    var stall: Duration?

    init(status: HTTPResponseStatus = .ok, headers: HTTPHeaders = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    static func json(_ value: JSONValue, status: HTTPResponseStatus = .ok) -> TestbedResponse {
        TestbedResponse(
            status: status,
            headers: ["Content-Type": "application/json; charset=utf-8"],
            body: value.encoded()
        )
    }

    static func text(_ text: String, status: HTTPResponseStatus = .ok) -> TestbedResponse {
        TestbedResponse(status: status, headers: ["Content-Type": "text/plain; charset=utf-8"], body: Array(text.utf8))
    }

    /// The kind of page a reverse proxy in front of a server answers with when it fails.
    static func html(status: HTTPResponseStatus) -> TestbedResponse {
        let page = "<html><head><title>\(status.code) \(status.reasonPhrase)</title></head>"
            + "<body><center><h1>\(status.code) \(status.reasonPhrase)</h1></center><hr><center>nginx</center></body></html>\n"
        return TestbedResponse(status: status, headers: ["Content-Type": "text/html"], body: Array(page.utf8))
    }

    /// An XRPC error body: `{"error": name, "message": message}`.
    static func xrpcError(_ status: HTTPResponseStatus, _ name: String, _ message: String?) -> TestbedResponse {
        var body: [String: JSONValue] = ["error": .string(name)]
        if let message { body["message"] = .string(message) }
        return .json(.object(body), status: status)
    }
}
