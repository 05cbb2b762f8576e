import ATOAuth
import BlueskyHTTP
import Foundation
import JSONRPC

/// One request to an OAuth 2.0 server, its answer sorted into the three outcomes a caller acts
/// on: a JSON answer, an OAuth verdict, or no verdict (retry later).
enum OAuth2Exchange {
    /// Sends `request`; a 2xx answer is returned, anything else thrown: an OAuth error body of
    /// a 4xx as `.refused`, the rest (transport, 429, 5xx, an HTML page) as `.unavailable`.
    static func send(_ request: OutboundRequest, http: any HTTPFetching, timeout: Duration) async throws(OAuth2ClientError) -> InboundResponse {
        guard let response = try await send(request, http: http, timeout: timeout, notFoundIsNil: false) else {
            throw .unavailable("\(request.url.host ?? "the server") answered HTTP 404", retryAfter: nil)
        }
        return response
    }

    /// The same; a 404 is nil when `notFoundIsNil` (a document not published there).
    static func send(_ request: OutboundRequest, http: any HTTPFetching, timeout: Duration,
                     notFoundIsNil: Bool) async throws(OAuth2ClientError) -> InboundResponse? {
        let response: InboundResponse
        do {
            response = try await http.send(request, timeout: timeout)
        } catch {
            throw .noAnswer("\(request.url.host ?? "the server"): \(error)")
        }
        guard !(200..<300).contains(response.status) else { return response }
        if response.status == 404, notFoundIsNil { return nil }
        let waited = response.serverAskedWait()
        if (400..<500).contains(response.status), response.status != 429,
           var refusal = OAuthErrorResponse(status: response.status, body: response.body) {
            refusal.retryAfter = waited
            throw .refused(refusal)
        }
        throw .unavailable("\(request.url.host ?? "the server") answered HTTP \(response.status)", retryAfter: waited)
    }

    /// A form POST (`application/x-www-form-urlencoded`), with HTTP Basic client authentication
    /// when `basic` is given.
    static func postForm(_ url: URL, _ form: FormBody, basic: (id: String, secret: String)? = nil) -> OutboundRequest {
        var headers = [("Content-Type", FormBody.contentType), ("Accept", "application/json")]
        if let basic {
            let pair = FormEncoding.encode(basic.id) + ":" + FormEncoding.encode(basic.secret)
            headers.append(("Authorization", "Basic " + Data(pair.utf8).base64EncodedString()))
        }
        return OutboundRequest(method: "POST", url: url, headers: headers, body: Array(form.encoded.utf8))
    }

    /// The answer's body as a JSON object.
    static func object(_ response: InboundResponse, what: String) throws(OAuth2ClientError) -> JSONValue {
        guard let value = try? JSONValue.parse(response.body), case .object = value else {
            throw .invalidAnswer("\(what) is not a JSON object")
        }
        return value
    }
}
