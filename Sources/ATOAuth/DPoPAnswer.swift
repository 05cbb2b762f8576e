import BlueskyHTTP
import DPoP
import Foundation

/// What both DPoP clients (``OAuthServerClient`` and ``DPoPResourceClient``) do with every
/// answer: learn the server's clock and its latest nonce from it, and decide whether the
/// request is worth signing once more.
enum DPoPAnswer {
    /// Records the answer's `Date` and `DPoP-Nonce`, then says whether the first attempt should
    /// be signed again: a nonce challenge that brought a new nonce, or a proof refused because
    /// the server's clock stepped (its `Date` says so; the server checks the proof before the
    /// grant or the token). Retrying without either would only be refused the same way.
    static func shouldSignAgain(
        _ response: InboundResponse, attempt: Int, sentNonce: String?, skewUsed: TimeInterval,
        nonces: DPoPNonceCache, scope: String, origin: String, clockSkew: ClockSkewEstimator, receivedAt: Date
    ) -> Bool {
        let date = response.header("Date")
        let authenticate = response.header("WWW-Authenticate")
        clockSkew.record(dateHeader: date, receivedAt: receivedAt)
        let freshNonce = response.header("DPoP-Nonce")
        nonces.update(account: scope, origin: origin, nonce: freshNonce, receivedAt: receivedAt)
        guard attempt == 1 else { return false }
        if DPoPChallenge.isNonceChallenge(status: response.status, wwwAuthenticate: authenticate, body: response.body) {
            return freshNonce.map { $0 != sentNonce } ?? false
        }
        return DPoPChallenge.isProofRefused(status: response.status, wwwAuthenticate: authenticate, body: response.body)
            && clockSkew.resynchronize(dateHeader: date, receivedAt: receivedAt, signedWith: skewUsed)
    }
}
