import Foundation
import JSONRPC
import NIOHTTP1
import WebBasics

/// What the testbed's plain OAuth 2.0 servers read and write alike: form or JSON bodies, client
/// credentials, redirects and token answers.
enum OAuth2Forms {
    /// Runs an endpoint unless a failure was injected for it (`failureKey`); an OAuth refusal
    /// becomes its error answer; nothing is cached.
    static func answer(_ context: TestbedContext, failureKey: String,
                       _ body: () throws(OAuthFailure) -> TestbedResponse) -> TestbedResponse {
        var response: TestbedResponse
        if let failure = context.failures.take(nsid: failureKey) {
            let status = HTTPResponseStatus(statusCode: failure.status)
            response = failure.html
                ? .html(status: status)
                : OAuthFailure(status, failure.errorName ?? (failure.status == 429 ? "rate_limit_exceeded" : "server_error"),
                               "injected failure (\(failure.status))").response
            if let seconds = failure.retryAfterSeconds { response.headers.replaceOrAdd(name: "Retry-After", value: String(seconds)) }
        } else {
            do throws(OAuthFailure) {
                response = try body()
            } catch {
                response = error.response
            }
        }
        response.headers.replaceOrAdd(name: "Cache-Control", value: "no-store")
        return response
    }

    /// A form or JSON body's fields (a JSON array, or a form's `name[]`, gives several values).
    static func fields(_ request: TestbedRequest) throws(OAuthFailure) -> [String: [String]] {
        let type = request.headers.first(name: "content-type")?.lowercased() ?? ""
        if type.hasPrefix("application/json") {
            guard case .object(let object)? = try? JSONValue.parse(request.bodyBytes) else { throw .invalidRequest("The body is not a JSON object") }
            return object.compactMapValues { value in
                if case .array(let items) = value { return items.compactMap(\.stringValue) }
                return value.stringValue.map { [$0] }
            }
        }
        var fields: [String: [String]] = [:]
        for (name, value) in TestbedRequest.parsePairs(Substring(String(decoding: request.bodyBytes, as: UTF8.self))) {
            fields[name.hasSuffix("[]") ? String(name.dropLast(2)) : name, default: []].append(value)
        }
        return fields
    }

    static func required(_ name: String, in fields: [String: String]) throws(OAuthFailure) -> String {
        guard let value = fields[name], !value.isEmpty else { throw .invalidRequest("Missing required parameter: \(name).") }
        return value
    }

    /// `client_secret_basic`, else `client_id` (and `client_secret`) in the body.
    static func clientCredentials(_ request: TestbedRequest, _ fields: [String: String]) -> (id: String?, secret: String?) {
        if let header = request.headers.first(name: "authorization"), header.lowercased().hasPrefix("basic "),
           let decoded = Data(base64Encoded: String(header.dropFirst(6))).map({ String(decoding: $0, as: UTF8.self) }),
           let colon = decoded.firstIndex(of: ":") {
            return (PercentDecoding.decode(decoded[..<colon], plusIsSpace: true),
                    PercentDecoding.decode(decoded[decoded.index(after: colon)...], plusIsSpace: true))
        }
        return (fields["client_id"], fields["client_secret"])
    }

    /// 302 to `uri` with the parameters that have a value.
    static func redirect(_ uri: String, _ parameters: [(String, String?)]) -> TestbedResponse {
        let query = parameters.compactMap { name, value in value.map { name + "=" + AuthorizationServer.percentEncode($0) } }
            .joined(separator: "&")
        return TestbedResponse(status: .found, headers: ["Location": uri + (uri.contains("?") ? "&" : "?") + query])
    }

    /// RFC 6749 §5.1, with Mastodon's `created_at`; no `refresh_token` when none was issued.
    /// - Parameter lifetime: nil for a token that never expires (no `expires_in`, as Mastodon).
    static func tokenAnswer(access: String, refresh: String?, scope: String, lifetime: Duration?, now: Date) -> TestbedResponse {
        var fields: [String: JSONValue] = [
            "access_token": .string(access), "token_type": "Bearer", "scope": .string(scope),
            "created_at": .number(now.timeIntervalSince1970.rounded(.down)),
        ]
        if let lifetime { fields["expires_in"] = .number(lifetime.seconds.rounded()) }
        if let refresh { fields["refresh_token"] = .string(refresh) }
        return .json(.object(fields))
    }
}

extension OAuth2Forms {
    /// The token of `Authorization: Bearer <token>`.
    static func bearer(_ request: TestbedRequest) -> String? {
        guard let header = request.headers.first(name: "authorization"), header.lowercased().hasPrefix("bearer ") else { return nil }
        return String(header.dropFirst(7))
    }
}
