import Foundation
import JSONRPC
import RPCServer

/// `http.call`: a call to an OAuth 2.0 server's account (docs/PROTOCOL.md).
extension DaemonMethods {
    func httpCall(_ params: Params, peer: PeerCredentials) async throws(DaemonError) -> JSONValue {
        var call = try HTTPCall(params: params)
        var account: UUID?
        if let client {
            do throws(DaemonError) {
                account = try client.admit(&call, in: accounts.registry)
            } catch {
                if case .policyDenied = error { accounts.environment.metrics?.policyDenied(client: client.metricsName) }
                throw error
            }
        }
        let httpProxy = HTTPCallProxy(proxy)
        do throws(DaemonError) {
            let response = try await proxy.counted(.jsonRPC, status: { $0.status }) { upstream async throws(DaemonError) in
                try await httpProxy.send(call, upstream: upstream)
            }
            journal.record(call, account: account, pid: peer.pid, client: client, outcome: { String(response.status) })
            if call.mayWriteProfile, (200..<300).contains(response.status), let session = try? accounts.registry.session(call.account) {
                // The write may have changed the profile (a new name, a new avatar).
                accounts.refreshProfileSoon(of: session)
            }
            return HTTPCallProxy.result(of: response)
        } catch {
            logger.notice("http call failed", metadata: ["method": "\(call.method)", "path": "\(call.path)", "outcome": "\(error.rpcError.name)"])
            journal.record(call, account: account, pid: peer.pid, client: client, outcome: { error.rpcError.name })
            throw error
        }
    }
}
