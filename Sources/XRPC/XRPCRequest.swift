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
        var components = URLComponents(url: service, resolvingAgainstBaseURL: false) ?? URLComponents()
        let base = components.path.hasSuffix("/") ? String(components.path.dropLast()) : components.path
        components.path = base + "/xrpc/" + nsid
        var items: [URLQueryItem] = []
        for (name, value) in parameters {
            switch value {
            case .single(let v): items.append(URLQueryItem(name: name, value: v))
            case .list(let vs): items.append(contentsOf: vs.map { URLQueryItem(name: name, value: $0) })
            }
        }
        // URLQueryItem leaves '+' alone, which servers read as a space.
        components.percentEncodedQueryItems = items.isEmpty ? nil : items.map {
            URLQueryItem(name: Self.escape($0.name), value: $0.value.map(Self.escape))
        }
        return components.url ?? service
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

    private static let queryAllowed: CharacterSet = {
        var set = CharacterSet.alphanumerics
        set.insert(charactersIn: "-._~:@!$'()*,;/?")
        return set
    }()

    private static func escape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: queryAllowed) ?? text
    }
}
