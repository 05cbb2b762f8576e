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

    /// The first value of header `name`, compared case-insensitively (ASCII, as HTTP says).
    public func header(_ name: String) -> String? {
        headers.first { Self.asciiCaseInsensitiveEqual($0.0, name) }?.1
    }

    /// The media type without parameters, lowercased (`application/json`).
    public var mediaType: String? {
        guard let value = header("content-type") else { return nil }
        let type = value.utf8.prefix { $0 != UInt8(ascii: ";") }
            .drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        var bytes = Array(type)
        while let last = bytes.last, last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") { bytes.removeLast() }
        return String(decoding: bytes.map(Self.asciiLowercased), as: UTF8.self)
    }

    public static func asciiLowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
    }

    static func asciiCaseInsensitiveEqual(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && zip(a.utf8, b.utf8).allSatisfy { asciiLowercased($0) == asciiLowercased($1) }
    }

    public var isJSON: Bool { mediaType == "application/json" }
}

/// Anything that can perform an ``OutboundRequest``: the real client, or a test double.
public protocol HTTPFetching: Sendable {
    /// Sends `request` and collects the whole response (up to the client's size limit), all of
    /// it within `timeout`: every request names its deadline.
    func send(_ request: OutboundRequest, timeout: Duration) async throws(HTTPError) -> InboundResponse
}
