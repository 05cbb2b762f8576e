import BlueskyHTTP
import Foundation

/// A value of an XRPC query parameter: repeated keys carry arrays.
public enum XRPCParameter: Sendable, Hashable {
    case single(String)
    case list([String])
}

/// The body of a procedure call.
public enum XRPCBody: Sendable, Hashable {
    case json([UInt8])
    case bytes([UInt8], contentType: String)
}

/// One XRPC call, ready to be signed (authorization) and sent to a PDS.
public struct XRPCRequest: Sendable {
    public var service: URL
    public var nsid: String
    public var kind: XRPCMethodKind
    public var parameters: [(String, XRPCParameter)]
    public var body: XRPCBody?
    /// Extra headers, e.g. `atproto-proxy`.
    public var headers: [(String, String)]

    public init(service: URL, nsid: String, kind: XRPCMethodKind,
                parameters: [(String, XRPCParameter)] = [], body: XRPCBody? = nil,
                headers: [(String, String)] = []) {
        self.service = service
        self.nsid = nsid
        self.kind = kind
        self.parameters = parameters
        self.body = body
        self.headers = headers
    }

    /// `<service>/xrpc/<nsid>?<params>`, with the service's own path kept (entryways behind a prefix).
    public var url: URL {
        var text = service.absoluteString
        if text.hasSuffix("/") { text.removeLast() }
        text += "/xrpc/" + nsid
        var separator = "?"
        for (name, value) in parameters {
            let values: [String] = switch value {
            case .single(let v): [v]
            case .list(let vs): vs
            }
            for v in values {
                text += separator + Self.escape(name) + "=" + Self.escape(v)
                separator = "&"
            }
        }
        return URL(string: text) ?? service
    }

    /// The outbound HTTP request, with `authorization` added when given.
    public func outbound(authorization: String?) -> OutboundRequest {
        var headers = self.headers
        if let authorization { headers.append(("Authorization", authorization)) }
        var bytes: [UInt8]?
        switch body {
        case .json(let json):
            headers.append(("Content-Type", "application/json"))
            bytes = json
        case .bytes(let raw, let contentType):
            headers.append(("Content-Type", contentType))
            bytes = raw
        case nil:
            if kind == .procedure { bytes = [] }
        }
        headers.append(("Accept", "application/json, */*"))
        return OutboundRequest(method: kind.httpMethod, url: url, headers: headers, body: bytes)
    }

    /// Percent-encodes everything but RFC 3986 unreserved characters and `:@!$'()*,;/?`;
    /// `+`, `&`, `=` and `#` are always encoded, so values survive form-style parsing.
    static func escape(_ text: String) -> String {
        var needsEncoding = false
        for byte in text.utf8 where !isAllowed(byte) { needsEncoding = true; break }
        guard needsEncoding else { return text }
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count + 8)
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in text.utf8 {
            if isAllowed(byte) {
                output.append(byte)
            } else {
                output.append(contentsOf: [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    private static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: ":"), UInt8(ascii: "@"),
             UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "*"),
             UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "/"), UInt8(ascii: "?"):
            true
        default:
            false
        }
    }
}
