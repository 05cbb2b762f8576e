import BlueskyHTTP
import DPoP
import Foundation
import XRPC

/// Calls whose bodies are passed on as they arrive (the gateway's uploads past its whole-body
/// limit, and the sync namespace's answers): never held whole in the daemon.
extension XRPCProxy {
    /// The PDS's answer to `call`: whole when it is an error blueskyd had to read (a refused
    /// token, a nonce challenge, a missing scope), or when a refused token was refreshed and the
    /// call made again (only a call without an upload can be sent twice); otherwise streamed.
    enum ProxiedAnswer {
        case whole(InboundResponse)
        case streamed(StreamedAnswer)
    }

    /// Error bodies read to classify them (a refused token, a nonce challenge): small JSON.
    static let errorBodyLimit = 64 * 1024

    func forwardStreamed(_ call: XRPCCall, upload: (chunks: ChunkSource, contentType: String)?)
        async throws(DaemonError) -> ProxiedAnswer
    {
        guard let streaming else { return .whole(try await forward(call)) }
        let session = try registry.session(call.account)
        let (credentials, pds) = try await session.liveCallTarget()
        var request = XRPCRequest(service: pds, nsid: call.nsid, kind: call.kind, parameters: call.parameters, body: call.body)
        if let proxy = call.atprotoProxy { request.headers.append(("atproto-proxy", proxy)) }
        if let labelers = call.acceptLabelers { request.headers.append(("atproto-accept-labelers", labelers)) }
        if let upload { request.headers.append(("Content-Type", upload.contentType)) }
        var outbound = request.outbound(authorization: nil)
        var dpopAccount: String?
        switch credentials {
        case .bearer(let token):
            outbound.headers.append(("Authorization", "Bearer \(token)"))
        case .dpop(let token, let key, let did):
            do {
                outbound.headers += try environment.oauth.resourceClient(http: environment.http)
                    .authorization(method: outbound.method, url: outbound.url, accessToken: token, dpopKey: key, account: did)
            } catch {
                throw .internalError("cannot sign the call: \(error)")
            }
            dpopAccount = did
        }
        if upload != nil { outbound.body = nil }
        let answer: StreamedAnswer
        do {
            answer = try await streaming.stream(outbound, upload: upload?.chunks, timeout: environment.upstreamTimeout)
        } catch {
            throw .upstreamUnavailable(error.description)
        }
        if let dpopAccount {
            environment.oauth.resourceClient(http: environment.http).observe(answer.headers, url: outbound.url, account: dpopAccount)
        }
        guard [400, 401, 403].contains(answer.status) else { return .streamed(answer) }
        let refusal: InboundResponse
        do {
            refusal = try await answer.collected(upTo: Self.errorBodyLimit, timeout: environment.upstreamTimeout)
        } catch {
            throw .upstreamUnavailable("the PDS's answer (\(answer.status)) could not be read: \(error)")
        }
        // A refused token, a nonce challenge or a move: the whole path refreshes, signs again
        // or follows, and makes the call once more. An upload was read as it was sent: it
        // cannot be sent again, so its answer goes back as it is.
        let retryable = dpopAccount != nil ? Self.isRefusedToken(refusal) || Self.isNonceChallenge(refusal)
            : Self.isExpiredToken(refusal)
        if upload == nil, retryable || Self.isAccountDeactivated(refusal) {
            return .whole(try await forward(call))
        }
        // As `forward` does for whole calls: a missing scope is named, and told to subscribers.
        try await checkScope(refusal, call: call, session: session)
        return .whole(refusal)
    }

    static func isNonceChallenge(_ response: InboundResponse) -> Bool {
        DPoPChallenge.isNonceChallenge(status: response.status, wwwAuthenticate: response.header("WWW-Authenticate"),
                                       body: response.body)
    }
}
