import BlueskyHTTP
import Foundation
import BlueskydVersion
import JSONRPC
import Logging
import NIOCore
import NIOHTTP1
import XRPCGateway

/// Answers the gateway's requests: each XRPC call goes to its account's PDS through the same
/// proxy as `xrpc.call` (credentials, DPoP, refresh-and-retry, moves), and the PDS's answer
/// comes back as it was: status, body, and the headers a client needs.
struct GatewayRoutes: GatewayHandler {
    let proxy: XRPCProxy
    let logger: Logger
    /// The policy of the socket served (a `[[client]]`'s gateway socket); nil on the main one.
    var client: ClientPolicy? = nil
    /// The live `bskyctl exec` tokens (the same table `gateway.issueToken` adds to).
    let tokens: GatewayTokens

    func respond(to request: GatewayRequest) async -> GatewayResponse {
        var request = request
        var policies: [ClientPolicy] = client.map { [$0] } ?? []
        let caller = GatewayCaller(uri: request.uri, headers: request.headers)
        if let token = caller.token {
            guard let policy = tokens.policy(of: token) else {
                return .xrpcError(.unauthorized, GatewayErrorName.gatewayTokenInvalid.rawValue,
                                  "this gateway token was revoked (its program exited) or never issued")
            }
            request.uri = caller.uri
            policies.append(policy)
        }
        if request.path.hasPrefix(HTTPRoute.prefix) { return await respondHTTP(to: request, policies: policies) }
        switch XRPCRoute.of(request) {
        case .refused(let refusal):
            return refusal
        case .health:
            let body = JSONValue.object(["version": .string(blueskydVersion)]).encoded()
            return GatewayResponse(status: .ok, headers: [("Content-Type", "application/json")], body: ByteBuffer(bytes: body))
        case .call(var call, let upload):
            var account: UUID?
            do throws(DaemonError) {
                account = try admit(&call, upload: upload, policies: policies)
            } catch {
                return Self.response(for: error)
            }
            let journal = WriteJournal(logger: logger)
            guard call.kind == .procedure, request.peer?.pid ?? 0 <= 0, request.loopbackSocket != nil else {
                let response = await forward(call, upload: upload)
                journal.record(call, account: account, pid: request.peer?.pid, client: policies.last,
                               status: Int(response.status.code))
                return response
            }
            // A write over TCP: its process is looked for while the call is made (the client is
            // surely there, its connection open).
            async let sender = request.senderProcess()
            let response = await forward(call, upload: upload)
            journal.record(call, account: account, pid: await sender, client: policies.last, status: Int(response.status.code))
            return response
        }
    }

    /// Holds `call` to each policy in turn (the socket's, then the token's), each of which may
    /// fix its account; returns the account fixed.
    private func admit(_ call: inout XRPCCall, upload: XRPCRoute.Upload?, policies: [ClientPolicy]) throws(DaemonError) -> UUID? {
        var account: UUID?
        for policy in policies where policy != .unrestricted {
            do throws(DaemonError) {
                account = try policy.admit(&call, uploadType: upload?.contentType, in: proxy.registry)
            } catch {
                if case .policyDenied = error { proxy.environment.metrics?.policyDenied(client: policy.metricsName) }
                throw error
            }
        }
        return account
    }

    private func forward(_ call: XRPCCall, upload: XRPCRoute.Upload?) async -> GatewayResponse {
        do throws(DaemonError) {
            // Uploads past the whole-body limit, and the sync namespace's answers (CAR files,
            // blobs), are passed on as they come; other answers are JSON views, held whole.
            guard upload != nil || call.nsid.hasPrefix("com.atproto.sync.") else {
                let answer = try await proxy.counted(.gateway, status: { $0.status }) { upstream async throws(DaemonError) in
                    try await proxy.forward(call, upstream: upstream)
                }
                return Self.passedOn(answer)
            }
            let answer: XRPCProxy.ProxiedAnswer
            do throws(DaemonError) {
                answer = try await proxy.forwardStreamed(call, upload: upload.map { ($0.chunks, $0.contentType) })
            } catch {
                proxy.environment.metrics?.proxiedCall(front: .gateway, status: nil, total: .zero, upstream: nil)
                throw error
            }
            switch answer {
            case .whole(let whole):
                proxy.environment.metrics?.proxiedCall(front: .gateway, status: whole.status, total: .zero, upstream: nil)
                return Self.passedOn(whole)
            case .streamed(let streamed):
                proxy.environment.metrics?.proxiedCall(front: .gateway, status: streamed.status, total: .zero, upstream: nil)
                return Self.passedOn(streamed, stallTimeout: proxy.environment.upstreamTimeout)
            }
        } catch {
            return Self.response(for: error)
        }
    }

    /// The PDS's answer with the headers a client reads: its media type, rate limits,
    /// `retry-after` and every `atproto-*` header.
    static func passedOn(_ answer: InboundResponse) -> GatewayResponse {
        GatewayResponse(status: HTTPResponseStatus(statusCode: answer.status), headers: passedHeaders(answer.headers),
                        body: ByteBuffer(bytes: answer.body))
    }

    /// A streamed answer, passed on as it arrives (cut off when it stalls for `stallTimeout`).
    static func passedOn(_ answer: StreamedAnswer, stallTimeout: Duration) -> GatewayResponse {
        GatewayResponse(status: HTTPResponseStatus(statusCode: answer.status), headers: passedHeaders(answer.headers),
                        streamed: ChunkSource(answer), stallTimeout: stallTimeout)
    }

    private static func passedHeaders(_ upstream: [(String, String)]) -> [(String, String)] {
        var headers: [(String, String)] = []
        for (name, value) in upstream {
            let lowered = String(decoding: name.utf8.map(InboundResponse.asciiLowercased), as: UTF8.self)
            if XRPCProxy.forwardedHeaders.contains(lowered) || lowered.hasPrefix("atproto-") {
                headers.append((lowered, value))
            }
        }
        return headers
    }

    /// A call blueskyd could not make, as an XRPC error body named as in the JSON-RPC
    /// catalogue, with the catalogue's data fields beside `error` and `message`.
    static func response(for error: DaemonError) -> GatewayResponse {
        let rpc = error.rpcError
        var fields = rpc.data
        fields["name"] = nil
        var headers: [(String, String)] = []
        if let seconds = rpc[.retryAfter]?.intValue { headers.append(("Retry-After", String(seconds))) }
        return .xrpcError(status(of: rpc.catalogueName), rpc.name, rpc.message, fields: fields, headers: headers)
    }

    static func status(of name: DaemonErrorName?) -> HTTPResponseStatus {
        switch name {
        case .invalidParams, .invalidRequest, .accountNotFound, .noDefaultAccount: .badRequest
        case .needsLogin, .authenticationFailed: .unauthorized
        case .permissionDenied, .policyDenied, .scopeMissing: .forbidden
        case .upstreamUnavailable, .identityResolutionFailed: .badGateway
        case .shuttingDown: .serviceUnavailable
        default: .internalServerError
        }
    }
}
