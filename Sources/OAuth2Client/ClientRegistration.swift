import ATOAuth
import BlueskyHTTP
import Foundation
import JSONRPC

/// A client registered at an OAuth 2.0 server: its id, and its secret when the server made it
/// a confidential client (Mastodon's apps are). The secret is sealed like every other one.
public struct RegisteredClient: Sendable, Equatable, CustomStringConvertible {
    public var clientID: String
    public var clientSecret: String?

    public init(clientID: String, clientSecret: String? = nil) {
        self.clientID = clientID
        self.clientSecret = clientSecret
    }

    public var description: String { "RegisteredClient(\(clientID), secret \(clientSecret == nil ? "none" : "redacted"))" }
}

/// Registers blueskyd at a server that offers it: RFC 7591 dynamic registration (a public
/// client), else Mastodon's `POST /api/v1/apps`.
public struct ClientRegistration: Sendable {
    let http: any HTTPFetching
    let timeout: Duration

    public init(http: any HTTPFetching, timeout: Duration) {
        self.http = http
        self.timeout = timeout
    }

    public func register(at metadata: ProviderMetadata, clientName: String, redirectURI: String, scope: String,
                         website: String? = nil) async throws(OAuth2ClientError) -> RegisteredClient {
        if let endpoint = metadata.registrationEndpoint {
            var document: [String: JSONValue] = [
                "client_name": .string(clientName), "redirect_uris": [.string(redirectURI)],
                "token_endpoint_auth_method": "none", "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"], "scope": .string(scope), "application_type": "native",
            ]
            if let website { document["client_uri"] = .string(website) }
            let answer = try await postJSON(endpoint, .object(document), what: "the registration answer")
            guard let clientID = answer["client_id"]?.stringValue, !clientID.isEmpty else {
                throw .invalidAnswer("the registration answer has no client_id")
            }
            return RegisteredClient(clientID: clientID, clientSecret: answer["client_secret"]?.stringValue)
        }
        if let endpoint = metadata.appRegistrationEndpoint {
            var form = FormBody([("client_name", clientName), ("redirect_uris", redirectURI), ("scopes", scope)])
            form.append("website", website)
            let response = try await OAuth2Exchange.send(OAuth2Exchange.postForm(endpoint, form), http: http, timeout: timeout)
            let answer = try OAuth2Exchange.object(response, what: "the app registration answer")
            guard let clientID = answer["client_id"]?.stringValue, let secret = answer["client_secret"]?.stringValue else {
                throw .invalidAnswer("the app registration answer lacks client_id or client_secret")
            }
            return RegisteredClient(clientID: clientID, clientSecret: secret)
        }
        throw .registrationUnavailable(metadata.issuer)
    }

    private func postJSON(_ url: URL, _ document: JSONValue, what: String) async throws(OAuth2ClientError) -> JSONValue {
        let request = OutboundRequest(method: "POST", url: url, headers: [("Content-Type", "application/json"), ("Accept", "application/json")],
                                      body: document.encoded())
        return try OAuth2Exchange.object(try await OAuth2Exchange.send(request, http: http, timeout: timeout), what: what)
    }
}
