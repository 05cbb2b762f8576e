import Foundation
import NIOCore
import NIOHTTP1
import WebBasics
import XRPCGateway

/// The gateway's `/http/<account>/<path>`: a call to an OAuth 2.0 server's account, made by
/// the same `HTTPCallProxy` as `http.call`.
enum HTTPRoute {
    static let prefix = "/http/"

    /// A call, or the answer refusing it.
    enum Outcome {
        case call(HTTPCall)
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
        let body: [UInt8]?
        switch request.body {
        case .whole(let bytes): body = bytes.readableBytes > 0 ? Array(bytes.readableBytesView) : nil
        case .streamed:
            // Held whole so that a call refused for its token can be sent again after a refresh.
            return .refused(.xrpcError(.payloadTooLarge, "PayloadTooLarge",
                                       "a body sent to an OAuth 2.0 server's account is held whole: at most 1 MiB, with a Content-Length"))
        }
        let headers = request.headers.map { ($0.name, $0.value) }
        do throws(DaemonError) {
            let path = slash == rest.endIndex ? "/" : String(rest[slash...])
            return .call(try HTTPCall(account: account, method: request.method.rawValue, path: path,
                                         query: request.query.map(String.init), headers: headers, body: body))
        } catch {
            return .refused(GatewayRoutes.response(for: error))
        }
    }
}

extension GatewayRoutes {
    /// Makes an `/http/` call under `policies` (each may refuse it or fix its account).
    func respondHTTP(to request: GatewayRequest, policies: [ClientPolicy]) async -> GatewayResponse {
        var call: HTTPCall
        switch HTTPRoute.call(of: request) {
        case .refused(let refusal): return refusal
        case .call(let made): call = made
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
        do throws(DaemonError) {
            let httpProxy = HTTPCallProxy(proxy)
            let answer = try await proxy.counted(.gateway, status: { $0.status }) { upstream async throws(DaemonError) in
                try await httpProxy.send(call, upstream: upstream)
            }
            journal.record(call, account: account, pid: request.peer?.pid, client: policies.last, outcome: { String(answer.status) })
            return GatewayResponse(status: HTTPResponseStatus(statusCode: answer.status), headers: HTTPCallProxy.passedHeaders(answer.headers),
                                   body: ByteBuffer(bytes: answer.body))
        } catch {
            journal.record(call, account: account, pid: request.peer?.pid, client: policies.last, outcome: { error.rpcError.name })
            return Self.response(for: error)
        }
    }
}
