import NIOCore
import XRPCGateway

/// The metrics socket's one route: `GET /metrics`, Prometheus's text exposition.
struct MetricsRoutes: GatewayHandler {
    let metrics: DaemonMetrics
    let environment: SessionEnvironment
    /// `metrics_per_account`: a series pair per account (labels grow with the accounts).
    var perAccount = false

    func respond(to request: GatewayRequest) async -> GatewayResponse {
        guard request.path == "/metrics" else {
            return .xrpcError(.notFound, GatewayErrorName.notFound.rawValue, "only /metrics is served here")
        }
        guard request.method == .GET || request.method == .HEAD else {
            return .xrpcError(.methodNotAllowed, GatewayErrorName.methodNotSupported.rawValue, "use GET /metrics",
                              headers: [("Allow", "GET, HEAD")])
        }
        let outage = environment.store.health.outage
        var values = ScrapedValues(accounts: environment.registry.census, subscribers: environment.events.subscriberCount,
                                   unsavedTokens: environment.unsaved.withLock { $0.count },
                                   outage: outage.map { ($0.since, $0.failedWrites) },
                                   eventGaps: environment.events.gapsSent, eventsMissed: environment.events.eventsMissed,
                                   nonceChallenges: environment.oauth.nonces.challengesAnswered)
        if perAccount {
            let now = environment.now()
            var samples: [AccountSample] = []
            for session in environment.registry.allSessions {
                let record = await session.record
                samples.append(AccountSample(did: record.did, active: record.state == .active,
                                             accessExpiresIn: record.accessExpiresAt.map { $0.timeIntervalSince(now) }))
            }
            values.perAccount = samples
        }
        let text = metrics.exposition(values)
        return GatewayResponse(status: .ok, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")],
                               body: ByteBuffer(bytes: text))
    }
}
