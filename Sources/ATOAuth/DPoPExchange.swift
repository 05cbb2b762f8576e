import BlueskyHTTP
import DPoP
import Foundation

/// One DPoP-signed request as both clients (``OAuthServerClient`` and ``DPoPResourceClient``)
/// make it: signed with the latest nonce of its (scope, origin) and the server's clock, sent,
/// and signed once more when the answer asks for it. Every answer teaches the nonce cache and
/// the clock estimate.
struct DPoPExchange {
    let request: DPoPRequest
    let signer: DPoPSigner
    let nonces: DPoPNonceCache
    let clockSkew: ClockSkewEstimator
    /// The nonce cache's key: the account, or a login's own scope until its DID is known.
    let scope: String
    let now: @Sendable () -> Date

    /// Runs the exchange: `send` makes one attempt with the given proof; `proofFailed` turns a
    /// signing failure into the caller's error.
    /// - Parameter mayRetry: whether a second attempt may still leave (asked only when the
    ///   answer calls for one): a refresh under a lease sends it only while enough lease is left.
    func run<Failure: Error>(
        proofFailed: (DPoPError) -> Failure,
        mayRetry: () -> Bool = { true },
        send: (_ proof: String) async throws(Failure) -> InboundResponse
    ) async throws(Failure) -> InboundResponse {
        let origin = request.target.origin
        var attempt = 0
        while true {
            attempt += 1
            let sentNonce = nonces.nonce(account: scope, origin: origin)
            let skew = clockSkew.offset
            let proof: String
            do {
                proof = try signer.proof(for: request, nonce: sentNonce, clockSkew: skew)
            } catch {
                throw proofFailed(error)
            }
            let response = try await send(proof)
            guard shouldSignAgain(response, attempt: attempt, sentNonce: sentNonce, skewUsed: skew, origin: origin), mayRetry() else {
                return response
            }
        }
    }

    /// Records the answer's `Date` and `DPoP-Nonce`, then says whether the first attempt should
    /// be signed again: a nonce challenge that brought a new nonce, or a proof refused because
    /// the server's clock stepped (its `Date` says so; the server checks the proof before the
    /// grant or the token). Retrying without either would only be refused the same way.
    private func shouldSignAgain(_ response: InboundResponse, attempt: Int, sentNonce: String?, skewUsed: TimeInterval,
                                 origin: String) -> Bool {
        let receivedAt = now()
        let date = response.header("Date")
        let authenticate = response.header("WWW-Authenticate")
        clockSkew.record(dateHeader: date, receivedAt: receivedAt)
        let freshNonce = response.header("DPoP-Nonce")
        nonces.update(account: scope, origin: origin, nonce: freshNonce, receivedAt: receivedAt)
        guard attempt == 1 else { return false }
        if DPoPChallenge.isNonceChallenge(status: response.status, wwwAuthenticate: authenticate, body: response.body) {
            let answered = freshNonce.map { $0 != sentNonce } ?? false
            if answered { nonces.noteChallenge() }
            return answered
        }
        return DPoPChallenge.isProofRefused(status: response.status, wwwAuthenticate: authenticate, body: response.body)
            && clockSkew.resynchronize(dateHeader: date, receivedAt: receivedAt, signedWith: skewUsed)
    }
}
