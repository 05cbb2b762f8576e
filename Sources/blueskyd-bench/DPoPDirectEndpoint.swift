import AsyncHTTPClient
import DPoP
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

/// The OAuth call straight to the PDS, as a program without the daemon makes it: the same
/// HTTPS client and request as the app-password direct side, but `Authorization: DPoP <token>`
/// and a fresh proof per call (new `jti`, `iat`, the latest nonce, `ath`), the `DPoP-Nonce` of
/// every response kept in a `DPoPNonceCache`, and a nonce challenge signed again once.
///
/// What is computed once per session, as any client would: the request (URL parsed, headers)
/// and the proof target with its `ath` (the token does not change while measuring).
struct DPoPDirectEndpoint: DirectBenchEndpoint {
    let client: HTTPClient
    /// The request without its `DPoP` header.
    let request: HTTPClient.Request
    let target: DPoPRequest
    let signer: DPoPSigner
    let nonces: DPoPNonceCache
    let did: String
    /// Nonce challenges this side met (shared by its copies).
    let challenges: ChallengeTally
    var preference: HTTPClient.EventLoopPreference = .indifferent

    init(client: HTTPClient, session: DirectOAuthSession, upstream: UpstreamInfo) throws {
        let url = upstream.pdsURL + "/xrpc/\(benchNSID)?actor=\(upstream.did)"
        var headers = HTTPHeaders()
        headers.add(name: "Authorization", value: "DPoP \(session.accessToken)")
        self.client = client
        request = try HTTPClient.Request(url: url, method: .GET, headers: headers)
        target = try DPoPRequest.resource(method: "GET", url: url, accessToken: session.accessToken)
        signer = DPoPSigner(key: session.key)
        nonces = DPoPNonceCache()
        did = session.did
        challenges = ChallengeTally()
    }

    func callOnce() -> EventLoopFuture<Bool> { send(attempt: 1) }

    func pinned(to loop: any EventLoop) -> DPoPDirectEndpoint {
        var pinned = self
        pinned.preference = .delegateAndChannel(on: loop)
        return pinned
    }

    private func send(attempt: Int) -> EventLoopFuture<Bool> {
        let origin = target.target.origin
        let sentNonce = nonces.nonce(account: did, origin: origin)
        var signed = request
        do {
            signed.headers.replaceOrAdd(name: "DPoP", value: try signer.proof(for: target, nonce: sentNonce))
        } catch {
            return client.eventLoopGroup.any().makeFailedFuture(error)
        }
        let sent = client.execute(request: signed, eventLoop: preference)
        return sent.flatMap { response in
            let freshNonce = response.headers.first(name: "DPoP-Nonce")
            nonces.update(account: did, origin: origin, nonce: freshNonce)
            if attempt == 1, let freshNonce, freshNonce != sentNonce, isNonceChallenge(response) {
                challenges.count.add(1, ordering: .relaxed)
                return send(attempt: 2)
            }
            return sent.eventLoop.makeSucceededFuture(response.status == .ok)
        }
    }

    private func isNonceChallenge(_ response: HTTPClient.Response) -> Bool {
        guard response.status == .unauthorized || response.status == .badRequest else { return false }
        let body = response.body.map { Array($0.readableBytesView) } ?? []
        return DPoPChallenge.isNonceChallenge(
            status: Int(response.status.code), wwwAuthenticate: response.headers.first(name: "WWW-Authenticate"), body: body)
    }
}

/// A counter shared by the copies of an endpoint.
final class ChallengeTally: Sendable {
    let count = Atomic<Int>(0)
}
