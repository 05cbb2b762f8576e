/// How an XRPC method is called over HTTP.
public enum XRPCMethodKind: String, Sendable, Codable, CaseIterable {
    /// HTTP GET with query parameters.
    case query
    /// HTTP POST with a body.
    case procedure
    /// A WebSocket event stream (not proxied).
    case subscription

    public var httpMethod: String {
        self == .procedure ? "POST" : "GET"
    }
}

/// The method kinds of every NSID in the bundled Lexicons.
public enum LexiconMethods {
    /// The kind of `nsid` when the Lexicons define it, nil otherwise.
    public static func kind(of nsid: String) -> XRPCMethodKind? {
        bundled[nsid]
    }

    /// The declared input encoding of a procedure whose body is not JSON (e.g. `*/*` for uploadBlob).
    public static func inputEncoding(of nsid: String) -> String? {
        bundledInputEncodings[nsid]
    }

    /// Number of methods known from the Lexicons.
    public static var count: Int { bundled.count }
}
