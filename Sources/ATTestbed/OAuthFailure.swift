import JSONRPC
import NIOHTTP1

/// An OAuth error answer (RFC 6749 §5.2): status, `error` and `error_description`.
struct OAuthFailure: Error {
    let status: HTTPResponseStatus
    let error: String
    let description: String

    init(_ status: HTTPResponseStatus = .badRequest, _ error: String, _ description: String) {
        self.status = status
        self.error = error
        self.description = description
    }

    static func invalidRequest(_ description: String) -> OAuthFailure { OAuthFailure(.badRequest, "invalid_request", description) }
    static func invalidClient(_ description: String) -> OAuthFailure { OAuthFailure(.badRequest, "invalid_client", description) }
    static func invalidGrant(_ description: String) -> OAuthFailure { OAuthFailure(.badRequest, "invalid_grant", description) }

    var response: TestbedResponse {
        .json(["error": .string(error), "error_description": .string(description)], status: status)
    }
}
