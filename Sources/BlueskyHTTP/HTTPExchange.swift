import Foundation

/// One outbound request, independent of the HTTP library underneath.
public struct OutboundRequest: Sendable {
    public var method: String
    public var url: URL
    public var headers: [(String, String)]
    public var body: [UInt8]?

    public init(method: String = "GET", url: URL, headers: [(String, String)] = [], body: [UInt8]? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// A fully received response.
public struct InboundResponse: Sendable {
    public var status: Int
    /// Header names as the server sent them; look them up with ``header(_:)``.
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(String, String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first value of header `name`, compared case-insensitively.
    public func header(_ name: String) -> String? {
        headers.first { $0.0.caseInsensitiveCompare(name) == .orderedSame }?.1
    }

    /// The media type without parameters, lowercased (`application/json`).
    public var mediaType: String? {
        header("content-type")?.split(separator: ";").first
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
    }

    public var isJSON: Bool { mediaType == "application/json" }
}

/// Anything that can perform an ``OutboundRequest``: the real client, or a test double.
public protocol HTTPFetching: Sendable {
    /// Sends `request` and collects the whole response (up to the client's size limit).
    func send(_ request: OutboundRequest, timeout: Duration) async throws(HTTPError) -> InboundResponse
}

extension HTTPFetching {
    public func send(_ request: OutboundRequest) async throws(HTTPError) -> InboundResponse {
        try await send(request, timeout: .seconds(30))
    }
}
