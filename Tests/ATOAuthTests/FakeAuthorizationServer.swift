import ATOAuth
import ATTestbed
import BlueskyHTTP
import DPoP
import Foundation
import JSONRPC

/// An in-memory authorization server strict about DPoP: it verifies every proof with
/// `DPoPVerifier`, demands its current nonce, binds the session to the PAR key, enforces PKCE,
/// rotates refresh tokens and destroys the session when one is replayed. Its clock can run
/// ahead of or behind the client's.
final class FakeAuthorizationServer: HTTPFetching, @unchecked Sendable {
    static let issuer = "https://auth.example.com"
    static let endpoints = AuthorizationServerEndpoints(
        issuer: issuer, authorization: URL(string: issuer + "/oauth/authorize")!, token: URL(string: issuer + "/oauth/token")!,
        pushedAuthorizationRequest: URL(string: issuer + "/oauth/par")!, revocation: URL(string: issuer + "/oauth/revoke")!)

    struct Exchange {
        var path: String
        var nonce: String?
        var status: Int
        var fields: [String]
    }

    private struct PushedRequest {
        var thumbprint: String
        var challenge: String
        var redirectURI: String
        var clientID: String
    }

    private struct Session {
        var thumbprint: String
        var refreshToken: String
        var usedRefreshTokens: Set<String> = []
    }

    private let lock = NSLock()
    private let localClock: @Sendable () -> Date
    private let verifier: DPoPVerifier
    private var skew: TimeInterval
    private var nonce = "nonce-1"
    private var acceptedNonces: Set<String> = ["nonce-1"]
    /// When set, no nonce is ever accepted, and every response brings a new one (a broken server).
    var refusesEveryNonce = false
    /// When false, nonce challenges come without a `DPoP-Nonce` header (a broken server).
    var sendsNonceHeader = true
    private var pushed: [String: PushedRequest] = [:]
    private var codes: [String: PushedRequest] = [:]
    private var sessions: [String: Session] = [:]  // by session id
    private var counter = 0
    private(set) var exchanges: [Exchange] = []
    let did = "did:plc:ewvi7nxzyoun6zhxrhs64oiz"

    init(skew: TimeInterval = 0, localClock: @escaping @Sendable () -> Date = { Date() }) {
        self.skew = skew
        self.localClock = localClock
        let serverClock: @Sendable () -> Date = { localClock().addingTimeInterval(skew) }
        verifier = DPoPVerifier(issuedAtTolerance: 10, now: serverClock)
    }

    var currentNonce: String { lock.withLock { nonce } }
    var log: [Exchange] { lock.withLock { exchanges } }

    /// Moves to a new nonce; the old one stays accepted when `keepingPrevious`.
    func rotateNonce(keepingPrevious: Bool) {
        lock.withLock { rotateLocked(keepingPrevious: keepingPrevious) }
    }

    private func rotateLocked(keepingPrevious: Bool) {
        counter += 1
        let next = "nonce-r\(counter)"
        acceptedNonces = keepingPrevious ? [nonce, next] : [next]
        nonce = next
    }

    /// The user approves the pushed request: returns the code the callback would carry.
    func approve(requestURI: String) -> String? {
        lock.withLock {
            guard let request = pushed.removeValue(forKey: requestURI) else { return nil }
            counter += 1
            let code = "code-\(counter)"
            codes[code] = request
            return code
        }
    }

    func send(_ request: OutboundRequest, timeout: Duration) async throws(HTTPError) -> InboundResponse {
        lock.withLock { handle(request) }
    }

    private func handle(_ request: OutboundRequest) -> InboundResponse {
        let path = request.url.path
        let form = FormEncoding.decode(String(decoding: request.body ?? [], as: UTF8.self)) ?? []
        var values: [String: String] = [:]
        for field in form { values[field.name] = field.value }
        let proof = request.headers.first { $0.0 == "DPoP" }?.1
        let claimedNonce = proof.flatMap(CompactJWS.init)?.payload(as: NonceClaim.self)?.nonce
        let response: InboundResponse
        do {
            let verified = try verifier.verify(proof, method: request.method, url: request.url.absoluteString,
                                               acceptedNonces: refusesEveryNonce ? [] : acceptedNonces)
            response = route(path, values, thumbprint: verified.thumbprint)
        } catch DPoPVerificationError.useNonce {
            response = reply(400, ["error": "use_dpop_nonce", "error_description": "Authorization server requires nonce in DPoP proof"])
        } catch {
            response = reply(400, ["error": .string(error.oauthError), "error_description": .string(error.description)])
        }
        exchanges.append(Exchange(path: path, nonce: claimedNonce, status: response.status, fields: form.map(\.name)))
        if refusesEveryNonce { rotateLocked(keepingPrevious: false) }
        var headers = response.headers
        headers.append(("Date", Self.imfDate(localClock().addingTimeInterval(skew))))
        if sendsNonceHeader { headers.append(("DPoP-Nonce", nonce)) }
        return InboundResponse(status: response.status, headers: headers, body: response.body)
    }

    private func route(_ path: String, _ values: [String: String], thumbprint: String) -> InboundResponse {
        switch path {
        case "/oauth/par":
            guard values["response_type"] == "code", values["code_challenge_method"] == "S256",
                  let challenge = values["code_challenge"], let redirectURI = values["redirect_uri"],
                  let clientID = values["client_id"], values["state"] != nil,
                  values["scope"].map({ OAuthScope.contains($0, "atproto") }) == true
            else { return reply(400, ["error": "invalid_request"]) }
            counter += 1
            let requestURI = "urn:ietf:params:oauth:request_uri:req-\(counter)"
            pushed[requestURI] = PushedRequest(thumbprint: thumbprint, challenge: challenge, redirectURI: redirectURI,
                                               clientID: clientID)
            return reply(201, ["request_uri": .string(requestURI), "expires_in": 299])
        case "/oauth/token" where values["grant_type"] == "authorization_code":
            guard let code = values["code"], let request = codes.removeValue(forKey: code) else {
                return reply(400, ["error": "invalid_grant", "error_description": "Invalid code"])
            }
            guard request.thumbprint == thumbprint else {
                return reply(400, ["error": "invalid_dpop_proof", "error_description": "Invalid DPoP key binding"])
            }
            guard let verifier = values["code_verifier"], PKCE.challenge(for: verifier) == request.challenge,
                  values["redirect_uri"] == request.redirectURI, values["client_id"] == request.clientID else {
                return reply(400, ["error": "invalid_grant", "error_description": "Invalid code_verifier"])
            }
            counter += 1
            let sessionID = "session-\(counter)"
            sessions[sessionID] = Session(thumbprint: thumbprint, refreshToken: "")
            return issueTokens(session: sessionID)
        case "/oauth/token" where values["grant_type"] == "refresh_token":
            let presented = values["refresh_token"] ?? ""
            guard let (id, session) = sessions.first(where: {
                $0.value.refreshToken == presented || $0.value.usedRefreshTokens.contains(presented)
            }).map({ ($0.key, $0.value) }) else {
                return reply(400, ["error": "invalid_grant", "error_description": "Invalid refresh token"])
            }
            guard session.refreshToken == presented else {
                sessions[id] = nil
                return reply(400, ["error": "invalid_grant", "error_description": "Refresh token replayed"])
            }
            guard session.thumbprint == thumbprint else {
                return reply(400, ["error": "invalid_dpop_proof", "error_description": "Invalid DPoP key binding"])
            }
            return issueTokens(session: id)
        case "/oauth/revoke":
            return reply(200, [:])
        default:
            return reply(404, ["error": "not_found"])
        }
    }

    private func issueTokens(session id: String) -> InboundResponse {
        counter += 1
        let refreshToken = "rt-\(counter)"
        if let old = sessions[id]?.refreshToken, !old.isEmpty { sessions[id]?.usedRefreshTokens.insert(old) }
        sessions[id]?.refreshToken = refreshToken
        return reply(200, ["access_token": .string("at-\(counter)"), "token_type": "DPoP", "refresh_token": .string(refreshToken),
                           "expires_in": 1800, "scope": "atproto transition:generic", "sub": .string(did)])
    }

    private func reply(_ status: Int, _ body: [String: JSONValue]) -> InboundResponse {
        InboundResponse(status: status, headers: [("Content-Type", "application/json")], body: JSONValue.object(body).encoded())
    }

    private struct NonceClaim: Decodable {
        var nonce: String?
    }

    static func imfDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }
}
