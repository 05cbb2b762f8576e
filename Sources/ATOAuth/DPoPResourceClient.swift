import BlueskyHTTP
import DPoP
import Foundation

/// Sends requests to a PDS with a DPoP-bound access token: `Authorization: DPoP <token>` and a
/// proof carrying `ath`.
///
/// Like ``OAuthServerClient``, it feeds every response's `DPoP-Nonce` to the nonce cache (keyed
/// by account and PDS origin) and its `Date` to the skew estimate, and retries a
/// `use_dpop_nonce` challenge exactly once when it brought a new nonce. Other answers, including
/// `invalid_token`, are returned as they are: classify them with ``DPoPChallenge/classify(status:wwwAuthenticate:body:)``
/// and refresh the session (never concurrently) when the token was refused.
public struct DPoPResourceClient: Sendable {
    private let http: any HTTPFetching
    private let nonces: DPoPNonceCache
    private let clockSkew: ClockSkewEstimator
    private let now: @Sendable () -> Date

    public init(http: any HTTPFetching, nonces: DPoPNonceCache, clockSkew: ClockSkewEstimator,
                now: @escaping @Sendable () -> Date = { Date() }) {
        self.http = http
        self.nonces = nonces
        self.clockSkew = clockSkew
        self.now = now
    }

    /// Sends `request` for `account`, replacing any `Authorization` or `DPoP` header it had.
    public func send(_ request: OutboundRequest, accessToken: String, dpopKey: DPoPKey, account: String,
                     timeout: Duration = .seconds(30)) async throws(DPoPResourceError) -> InboundResponse
    {
        let target: DPoPRequest
        do {
            target = try DPoPRequest.resource(method: request.method, url: request.url.absoluteString, accessToken: accessToken)
        } catch {
            throw .proof(error)
        }
        let baseHeaders = request.headers.filter { name, _ in
            let lowered = name.lowercased()
            return lowered != "authorization" && lowered != "dpop"
        }
        let exchange = DPoPExchange(request: target, signer: DPoPSigner(key: dpopKey, now: now), nonces: nonces,
                                    clockSkew: clockSkew, scope: account, now: now)
        return try await exchange.run(proofFailed: DPoPResourceError.proof) { proof throws(DPoPResourceError) in
            var outbound = request
            outbound.headers = baseHeaders + [("Authorization", "DPoP " + accessToken), ("DPoP", proof)]
            do throws(HTTPError) {
                return try await http.send(outbound, timeout: timeout)
            } catch {
                throw .transport(error)
            }
        }
    }
}

extension DPoPResourceClient {
    /// `Authorization` and `DPoP` for one attempt of a request whose answer is read as a stream
    /// (an upload, a CAR export): signed with the latest nonce, no retry here. Pass the answer's
    /// head to ``observe(_:url:account:)``.
    public func authorization(method: String, url: URL, accessToken: String, dpopKey: DPoPKey,
                              account: String) throws(DPoPResourceError) -> [(String, String)] {
        let target: DPoPRequest
        do {
            target = try DPoPRequest.resource(method: method, url: url.absoluteString, accessToken: accessToken)
        } catch {
            throw .proof(error)
        }
        let nonce = nonces.nonce(account: account, origin: target.target.origin)
        do {
            let proof = try DPoPSigner(key: dpopKey, now: now).proof(for: target, nonce: nonce, clockSkew: clockSkew.offset)
            return [("Authorization", "DPoP " + accessToken), ("DPoP", proof)]
        } catch {
            throw .proof(error)
        }
    }

    /// Learns what an answer's head teaches: its `DPoP-Nonce` and its `Date`.
    public func observe(_ headers: [(String, String)], url: URL, account: String) {
        let head = InboundResponse(status: 200, headers: headers, body: [])
        let receivedAt = now()
        clockSkew.record(dateHeader: head.header("Date"), receivedAt: receivedAt)
        guard let origin = try? HTTPTargetURI(url).origin else { return }
        nonces.update(account: account, origin: origin, nonce: head.header("DPoP-Nonce"), receivedAt: receivedAt)
    }
}

/// Failures to send a DPoP-bound request (the server's own answers are returned, not thrown).
public enum DPoPResourceError: Error, Sendable, Equatable, CustomStringConvertible {
    case transport(HTTPError)
    case proof(DPoPError)

    public var description: String {
        switch self {
        case .transport(let error): error.description
        case .proof(let error): error.description
        }
    }
}
