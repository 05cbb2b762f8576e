import Foundation
import NIOCore
import NIOHTTP1
import BlueskyHTTP
import WebBasics
import XRPCGateway

/// The gateway's `/http/<account>/<path>`: a call to an OAuth 2.0 server's account, made by
/// the same `HTTPCallProxy` as `http.call`.
enum HTTPRoute {
    static let prefix = "/http/"

    /// A call (its body, past the whole-body limit or chunked, as `upload`), or the answer
    /// refusing it.
    enum Outcome {
        case call(HTTPCall, upload: ChunkSource?)
        case refused(GatewayResponse)
    }

    /// The call `request` asks for, or the answer saying why it is none.
    static func call(of request: GatewayRequest) -> Outcome {
        let rest = request.path.dropFirst(prefix.count)
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        guard let account = PercentDecoding.decode(rest[..<slash], plusIsSpace: false), !account.isEmpty else {
            return .refused(.xrpcError(.notFound, GatewayErrorName.notFound.rawValue,
                                       "name the account: /http/<account>/<path on its server>"))
        }
        // A body up to the whole-body limit is held, so that a call refused for its token can be
        // sent again after a refresh; a larger one is passed on as it arrives.
        var body: [UInt8]?
        var upload: ChunkSource?
        switch request.body {
        case .whole(let bytes): body = bytes.readableBytes > 0 ? Array(bytes.readableBytesView) : nil
        case .streamed(let chunks): upload = chunks
        }
        let headers = request.headers.map { ($0.name, $0.value) }
        do throws(DaemonError) {
            let path = slash == rest.endIndex ? "/" : String(rest[slash...])
            var call = try HTTPCall(account: account, method: request.method.rawValue, path: path,
                                    query: request.query.map(String.init), headers: headers, body: body)
            call.bodyIsStreamed = upload != nil
            return .call(call, upload: upload)
        } catch {
            return .refused(GatewayRoutes.response(for: error))
        }
    }
}

extension GatewayRoutes {
    /// Makes an `/http/` call under `policies` (each may refuse it or fix its account).
    func respondHTTP(to request: GatewayRequest, policies: [ClientPolicy]) async -> GatewayResponse {
        var call: HTTPCall
        let upload: ChunkSource?
        switch HTTPRoute.call(of: request) {
        case .refused(let refusal): return refusal
        case .call(let made, let body):
            call = made
            upload = body
        }
        var account: UUID?
        do throws(DaemonError) {
            for policy in policies where policy != .unrestricted {
                do throws(DaemonError) {
                    account = try policy.admit(&call, in: proxy.registry)
                } catch {
                    if case .policyDenied = error { proxy.environment.metrics?.policyDenied(client: policy.metricsName) }
                    throw error
                }
            }
        } catch {
            return Self.response(for: error)
        }
        let journal = WriteJournal(logger: logger)
        if let upload { return await respondStreamed(call, upload: upload, account: account, request: request, policies: policies) }
        // A write over TCP: its process is looked for while the call is made, as for XRPC writes.
        // Any other call names the peer it has (a child task per call would cost a hop).
        guard call.isWrite, request.peer?.pid ?? 0 <= 0, request.loopbackSocket != nil else {
            let (response, outcome) = await sendWhole(call)
            journal.record(call, account: account, pid: request.peer.flatMap { $0.pid > 0 ? $0.pid : nil },
                           client: policies.last, outcome: { outcome })
            return response
        }
        async let sender = request.senderProcess()
        let (response, outcome) = await sendWhole(call)
        journal.record(call, account: account, pid: await sender, client: policies.last, outcome: { outcome })
        return response
    }

    /// The server's answer to `call`, or the error's, with the outcome the journal records.
    private func sendWhole(_ call: HTTPCall) async -> (GatewayResponse, String) {
        do throws(DaemonError) {
            let httpProxy = HTTPCallProxy(proxy)
            let answer = try await proxy.counted(.gateway, status: { $0.status }) { upstream async throws(DaemonError) in
                try await httpProxy.send(call, upstream: upstream)
            }
            return (GatewayResponse(status: HTTPResponseStatus(statusCode: answer.status), headers: HTTPCallProxy.passedHeaders(answer.headers),
                                    body: ByteBuffer(bytes: answer.body)), String(answer.status))
        } catch {
            return (Self.response(for: error), error.rpcError.name)
        }
    }

    /// An upload passed on as it arrives, its answer passed back the same way.
    private func respondStreamed(_ call: HTTPCall, upload: ChunkSource, account: UUID?, request: GatewayRequest,
                                 policies: [ClientPolicy]) async -> GatewayResponse {
        let journal = WriteJournal(logger: logger)
        let started = ContinuousClock.now
        do throws(DaemonError) {
            async let sender = request.senderProcess()
            let answer = try await HTTPCallProxy(proxy).sendStreamed(call, upload: upload)
            proxy.count(.gateway, status: answer.status, since: started, upstream: nil)
            journal.record(call, account: account, pid: await sender, client: policies.last, outcome: { String(answer.status) })
            return GatewayResponse(status: HTTPResponseStatus(statusCode: answer.status), headers: HTTPCallProxy.passedHeaders(answer.headers),
                                   streamed: ChunkSource(answer), stallTimeout: proxy.environment.upstreamTimeout)
        } catch {
            proxy.count(.gateway, status: nil, since: started, upstream: nil)
            journal.record(call, account: account, pid: request.peer?.pid, client: policies.last, outcome: { error.rpcError.name })
            return Self.response(for: error)
        }
    }
}
