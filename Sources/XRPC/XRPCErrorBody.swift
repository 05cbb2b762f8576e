import BlueskyHTTP
import Foundation
import WebBasics

/// The `{"error": "Name", "message": "..."}` body of a failed XRPC call.
public struct XRPCErrorBody: Sendable, Equatable, Decodable {
    public var error: String?
    public var message: String?

    public init(error: String?, message: String?) {
        self.error = error
        self.message = message
    }

    /// Reads the body of `response`; nil when it isn't an XRPC error object.
    public init?(response: InboundResponse) {
        guard let decoded = try? JSONDecoder().decode(XRPCErrorBody.self, from: Data(response.body)),
              decoded.error != nil || decoded.message != nil else { return nil }
        // Kept for people to read (a state reason, a log line): never a server's megabytes.
        self.init(error: ServerText.clipped(decoded.error, limit: 128), message: ServerText.clipped(decoded.message))
    }

    /// "Name: message" or whichever of the two is present.
    public var summary: String {
        switch (error, message) {
        case let (e?, m?) where !m.isEmpty: "\(e): \(m)"
        case let (e?, _): e
        case let (nil, m?): m
        default: "unknown error"
        }
    }
}

extension InboundResponse {
    /// Status 5xx or 429: the server may succeed later.
    public var isTransientFailure: Bool { status >= 500 || status == 429 }
}
