import ATOAuth
import ATTestbed
import BlueskyHTTP
import DPoP
import Foundation
import JSONRPC
import Testing

/// A PDS that checks `Authorization: DPoP`, the proof (with `ath` and key binding) and its nonce,
/// answering as the reference PDS does: 401 with `WWW-Authenticate: DPoP error="…"`.
final class FakePDS: HTTPFetching, @unchecked Sendable {
    struct Seen {
        var status: Int
        var authorization: [String]
        var nonce: String?
    }

    private let lock = NSLock()
    private let verifier = DPoPVerifier()
    let validToken: String
    let boundThumbprint: String
    var nonce = "pds-nonce-1"
    var revoked = false
    private(set) var seen: [Seen] = []

    private struct NonceClaim: Decodable {
        var nonce: String?
    }

    init(validToken: String, boundThumbprint: String) {
        self.validToken = validToken
        self.boundThumbprint = boundThumbprint
    }

    var log: [Seen] { lock.withLock { seen } }

    func send(_ request: OutboundRequest, timeout: Duration) async throws(HTTPError) -> InboundResponse {
        lock.withLock {
            let authorizations = request.headers.filter { $0.0.lowercased() == "authorization" }.map(\.1)
            let proof = request.headers.first { $0.0 == "DPoP" }?.1
            var status = 200
            var challenge: String?
            if authorizations != ["DPoP " + validToken] || revoked {
                status = 401
                challenge = #"DPoP error="invalid_token", error_description="Token revoked""#
            } else {
                do throws(DPoPVerificationError) {
                    _ = try verifier.verify(proof, method: request.method, url: request.url.absoluteString, accessToken: validToken,
                                            boundThumbprint: boundThumbprint, acceptedNonces: [nonce])
                } catch {
                    status = 401
                    challenge = #"DPoP error="\#(error.oauthError)", error_description="\#(error.description)""#
                }
            }
            let claimed = proof.flatMap(CompactJWS.init)?.payload(as: NonceClaim.self)?.nonce
            seen.append(Seen(status: status, authorization: authorizations, nonce: claimed))
            var headers = [("DPoP-Nonce", nonce), ("Content-Type", "application/json")]
            if let challenge { headers.append(("WWW-Authenticate", challenge)) }
            return InboundResponse(status: status, headers: headers, body: Array(#"{"ok":true}"#.utf8))
        }
    }
}

@Suite("DPoP requests to a PDS")
struct DPoPResourceClientTests {
    let key = DPoPKey.generate()
    let url = URL(string: "https://pds.example.com/xrpc/app.bsky.actor.getProfile?actor=alice.example.com")!

    @Test("one nonce challenge on the first call, none after; Authorization replaced, not duplicated")
    func nonceThenCached() async throws {
        let pds = FakePDS(validToken: "at-1", boundThumbprint: key.thumbprint)
        let nonces = DPoPNonceCache()
        let client = DPoPResourceClient(http: pds, nonces: nonces, clockSkew: ClockSkewEstimator())
        let request = OutboundRequest(url: url, headers: [("authorization", "Bearer stale"), ("Accept", "application/json")])
        let first = try await client.send(request, accessToken: "at-1", dpopKey: key, account: "did:plc:a")
        let second = try await client.send(request, accessToken: "at-1", dpopKey: key, account: "did:plc:a")
        #expect(first.status == 200 && second.status == 200)
        #expect(pds.log.map(\.status) == [401, 200, 200])
        #expect(pds.log.map(\.nonce) == [nil, "pds-nonce-1", "pds-nonce-1"])
        #expect(pds.log.allSatisfy { $0.authorization == ["DPoP at-1"] })
        #expect(nonces.nonce(account: "did:plc:a", origin: "https://pds.example.com") == "pds-nonce-1")
    }

    @Test("a refused token comes back as invalid_token with its reason, without a retry")
    func invalidToken() async throws {
        let pds = FakePDS(validToken: "at-1", boundThumbprint: key.thumbprint)
        pds.revoked = true
        let client = DPoPResourceClient(http: pds, nonces: DPoPNonceCache(), clockSkew: ClockSkewEstimator())
        let response = try await client.send(OutboundRequest(url: url), accessToken: "at-1", dpopKey: key, account: "a")
        #expect(DPoPChallenge.classify(status: response.status, wwwAuthenticate: response.header("WWW-Authenticate"),
                                       body: response.body) == .invalidToken(description: "Token revoked"))
        #expect(pds.log.count == 1)
    }

    @Test("a proof from a key the token is not bound to is refused")
    func wrongKey() async throws {
        let pds = FakePDS(validToken: "at-1", boundThumbprint: DPoPKey.generate().thumbprint)
        let client = DPoPResourceClient(http: pds, nonces: DPoPNonceCache(), clockSkew: ClockSkewEstimator())
        let response = try await client.send(OutboundRequest(url: url), accessToken: "at-1", dpopKey: key, account: "a")
        #expect(response.status == 401)
        #expect(response.header("WWW-Authenticate")?.contains("Invalid DPoP key binding") == true)
    }
}
