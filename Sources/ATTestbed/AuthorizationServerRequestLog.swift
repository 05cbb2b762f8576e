import Foundation
import JSONRPC
import Synchronization

/// A POST to an authorization server's PAR, token or revocation endpoint, as it arrived: for
/// checking the client's real DPoP proofs with another verifier than the testbed's own.
/// Holds no token or code: only the proof and the fields that say what the request was for.
public struct RecordedAuthorizationServerRequest: Sendable, Equatable {
    /// The issuer that received it (`Testbed.oauthIssuer` or `rogueOAuthIssuer`).
    public var issuer: String
    /// `.pushedAuthorization`, `.token` or `.revocation`.
    public var endpoint: OAuthEndpoint
    /// The form's `grant_type` at the token endpoint (`authorization_code`, `refresh_token`).
    public var grantType: String?
    /// The form's `token_type_hint` at the revocation endpoint (`refresh_token`, `access_token`).
    public var tokenTypeHint: String?
    /// The `DPoP` header; nil when the request had none.
    public var proof: String?
    public var method: String
    /// The endpoint's URL (issuer and path, no query): what the proof's `htu` must be.
    public var url: String
    /// The testbed clock when the request arrived (proofs' `iat` is compared with it).
    public var receivedAt: Date
    /// The HTTP status answered; nil when the answer was dropped on purpose (`loseRefreshResponses`).
    public var status: Int?
    /// The OAuth `error` answered (`use_dpop_nonce`, `invalid_grant`, `rate_limit_exceeded`, …);
    /// nil on success.
    public var error: String?

    /// The request got a 2xx answer (sent or dropped): its proof passed every check.
    public var succeeded: Bool { status.map { (200..<300).contains($0) } ?? true }
}

/// The most recent requests to the authorization servers' POST endpoints, oldest first, bounded
/// so a long run (or a benchmark) does not accumulate them.
final class AuthorizationServerRequestLog: Sendable {
    /// How many requests are kept; older ones are forgotten.
    static let capacity = 256

    private let entries = Mutex<[RecordedAuthorizationServerRequest]>([])

    func append(_ entry: RecordedAuthorizationServerRequest) {
        entries.withLock { entries in
            if entries.count >= Self.capacity { entries.removeFirst(entries.count - Self.capacity + 1) }
            entries.append(entry)
        }
    }

    var all: [RecordedAuthorizationServerRequest] { entries.withLock { $0 } }

    func reset() { entries.withLock { $0 = [] } }
}

extension AuthorizationServer {
    /// Records a POST to PAR, token or revocation with the answer it got.
    func record(_ request: TestbedRequest, endpoint: OAuthEndpoint, receivedAt: Date, response: TestbedResponse) {
        let form = TestbedRequest.parseQuery(Substring(String(decoding: request.body.readableBytesView, as: UTF8.self)))
        let failed = response.status.code >= 400
        let error = failed ? (try? JSONValue.parse(response.body))?["error"]?.stringValue : nil
        oauth.authorizationServerRequests.append(RecordedAuthorizationServerRequest(
            issuer: issuer, endpoint: endpoint, grantType: form["grant_type"], tokenTypeHint: form["token_type_hint"],
            proof: request.headers.first(name: "dpop"), method: request.method.rawValue, url: issuer + request.path,
            receivedAt: receivedAt, status: response.dropsConnection ? nil : Int(response.status.code),
            error: error))
    }
}
