import BlueskydVersion
import Foundation
import JSONRPC
import Logging
import PostgresStore
import RPCServer
import XRPCGateway

/// The JSON-RPC methods of blueskyd (docs/PROTOCOL.md), dispatched by name.
struct DaemonMethods: RPCMethodHandler {
    let accounts: AccountManager
    let proxy: XRPCProxy
    let info: DaemonInfo
    let isStopping: @Sendable () -> Bool
    var events: EventHub { accounts.environment.events }
    let logger: Logger
    /// The policy of the socket served (a `[[client]]` socket); nil on the main socket.
    var client: ClientPolicy? = nil
    /// Tokens `gateway.issueToken` hands out for the gateway.
    var tokens: GatewayTokens = GatewayTokens()
    /// The private gateway sockets of `bskyctl exec` programs; nil where none can be made.
    var execSockets: ExecSockets? = nil
    var journal: WriteJournal { WriteJournal(logger: logger) }

    func handle(_ request: RPCRequest, context: RPCCallContext) async -> Result<JSONValue, RPCError> {
        do {
            return .success(try await dispatch(request, context: context))
        } catch {
            if case .policyDenied = error { accounts.environment.metrics?.policyDenied(client: client?.metricsName ?? "exec") }
            return .failure(error.rpcError)
        }
    }

    private func dispatch(_ request: RPCRequest, context: RPCCallContext) async throws(DaemonError) -> JSONValue {
        if isStopping() { throw .shuttingDown }
        let params = try Params(request.params)
        if let client, !Self.restrictedMethods.contains(request.method) { throw client.refuseManagement(request.method) }
        switch request.method {
        case "daemon.info":
            try params.allowOnly([])
            return info.json
        case "daemon.status":
            try params.allowOnly([])
            return await status()
        case "accounts.list":
            try params.allowOnly([])
            // Oldest first, ties by id: the registry's own order is the order the rows loaded in.
            var views: [(Date, String, JSONValue)] = []
            for session in accounts.registry.allSessions where client?.allows(session, in: accounts.registry) ?? true {
                views.append((await session.record.createdAt, session.id.uuidString, await session.view()))
            }
            return ["accounts": .array(views.sorted { ($0.0, $0.1) < ($1.0, $1.1) }.map(\.2))]
        case "accounts.add":
            try params.allowOnly(["identifier", "password", "authFactorToken", "makeDefault"])
            let record = try await accounts.addAppPasswordAccount(
                identifier: try params.requiredString("identifier"),
                password: try params.requiredString("password"),
                authFactorToken: try params.optionalString("authFactorToken"),
                makeDefault: try params.bool("makeDefault", default: false))
            return try await accountReply(record.id)
        case "accounts.remove":
            try params.allowOnly(["account"])
            let (record, ended) = try await accounts.remove(try params.requiredString("account"))
            return ["account": AccountView.json(record, nextRefreshAt: nil), "serverSessionEnded": .bool(ended)]
        case "accounts.setDefault":
            try params.allowOnly(["account"])
            let record = try await accounts.setDefault(try params.requiredString("account"))
            return try await accountReply(record.id)
        case "accounts.refresh":
            try params.allowOnly(["account", "force"])
            let record = try await accounts.refreshNow(try params.optionalString("account"),
                                                       force: try params.bool("force", default: false))
            return try await accountReply(record.id)
        case let method where method.hasPrefix("accounts.oauth."):
            return try await oauth(method, params)
        case "oauth.clientMetadata", "oauth.rotateClientKey":
            return try await client(request.method, params)
        case "events.subscribe":
            return try subscribe(params, context: context)
        case "events.unsubscribe":
            return try await unsubscribe(params, context: context)
        case "xrpc.call":
            try params.allowOnly(["nsid", "account", "params", "input", "inputBase64", "contentType", "kind", "proxy"])
            var call = try XRPCCall(params: params)
            let account = try client?.admit(&call, in: accounts.registry)
            return try await proxied(call, account: account, peer: context.peer)
        case "http.call":
            return try await httpCall(params, peer: context.peer)
        case "gateway.issueToken", "gateway.revokeToken":
            return try await gatewayToken(request.method, params, context: context)
        default:
            throw .methodNotFound(request.method)
        }
    }

    /// The methods a restricted client (a `[[client]]` socket) may use: its own accounts, their
    /// events, and calls. Not `daemon.status`: it counts every account.
    static let restrictedMethods: Set<String> = [
        "daemon.info", "accounts.list", "events.subscribe", "events.unsubscribe", "xrpc.call", "http.call",
    ]

    /// One proxied call, logged with its account, NSID and outcome (never its params or body);
    /// a write also in the journal with the caller's pid and program.
    private func proxied(_ call: XRPCCall, account: UUID?, peer: PeerCredentials) async throws(DaemonError) -> JSONValue {
        do throws(DaemonError) {
            let result = try await proxy.counted(.jsonRPC, status: { $0["status"]?.intValue }) { upstream async throws(DaemonError) in
                try await proxy.call(call, upstream: upstream)
            }
            if call.mayWriteProfile, let status = result["status"]?.intValue, (200..<300).contains(status),
               let session = try? accounts.registry.session(call.account) {
                accounts.refreshProfileSoon(of: session)
            }
            // The hot path: build the metadata only when a debug line will be written.
            if logger.logLevel <= .debug {
                logger.debug("xrpc call", metadata: callMetadata(call, outcome: result["status"]?.intValue.map(String.init) ?? "?"))
            }
            journal.record(call, account: account, pid: peer.pid, client: client,
                           outcome: { result["status"]?.intValue.map(String.init) ?? "?" })
            return result
        } catch {
            logger.notice("xrpc call failed", metadata: callMetadata(call, outcome: error.rpcError.name))
            journal.record(call, account: account, pid: peer.pid, client: client, outcome: { error.rpcError.name })
            throw error
        }
    }

    private func callMetadata(_ call: XRPCCall, outcome: String) -> Logger.Metadata {
        var metadata: Logger.Metadata = ["nsid": "\(call.nsid)", "outcome": "\(outcome)"]
        if let session = try? accounts.registry.session(call.account) {
            metadata["account"] = "\(session.id.uuidString.lowercased())"
        }
        return metadata
    }

    func accountReply(_ id: UUID) async throws(DaemonError) -> JSONValue {
        let session = try accounts.registry.session(id.uuidString)
        return ["account": await session.view()]
    }

    /// The accounts whose row's seal does not hold: how many, how many merely wait for a reseal,
    /// and the first 20 ids with what was found.
    private static func tampered(_ census: AccountCensus) -> JSONValue {
        let (count, unsealed, some) = census.altered(limit: 20)
        return ["count": .number(Double(count)), "unsealed": .number(Double(unsealed)),
                "accounts": .array(some.map { ["id": .string($0.0.uuidString.lowercased()), "seal": .string($0.1.rawValue)] })]
    }

    /// The keys this host holds, the one it seals with, the one its tenant names (a rekey while
    /// hosts run), and how many rows each key seals: "0 under the old key, no host holds it" is
    /// the end of a rekey. A SQLite store has one key, which seals every row. Nothing here
    /// waits for the database: the rows are counted in the background, every 2 s at most.
    private func storeKeys() -> JSONValue {
        guard let shared = accounts.store as? PostgresAccountStore else {
            let key = JSONValue.string(info.storeKeyFingerprint)
            return ["held": [key], "writing": key, "tenant": .null,
                    "rows": .object([info.storeKeyFingerprint: .number(Double(accounts.registry.count))])]
        }
        let report = shared.sealingKeysNow()
        return ["held": .array(report.held.map(JSONValue.string)), "writing": .string(report.writing),
                "tenant": report.tenant.map(JSONValue.string) ?? .null,
                "rows": .object(report.rows.mapValues { .number(Double($0)) }), "rowsCountedAt": AccountView.timestamp(report.countedAt)]
    }

    private func status() async -> JSONValue {
        let census = accounts.registry.census
        let scheduler = accounts.scheduler
        let outage = accounts.store.health.outage
        var status: [String: JSONValue] = [
            "accounts": .number(Double(accounts.registry.count)),
            "active": .number(Double(census.count(.active))),
            "needsLogin": .number(Double(census.count(.needsLogin))),
            "retrying": .number(Double(census.count(.retrying))),
            "oauthSessionsEndingSoon": .number(Double(census.sessionsEndingSoon(now: Date()))),
            "refreshing": .number(Double(accounts.environment.refreshes.running)),
            "tokensRotated": .number(Double(accounts.environment.refreshes.rotated)),
            "nextRefreshAt": AccountView.timestamp(await scheduler.nextScheduled()),
            "tampered": Self.tampered(census),
            "storeKey": .string(info.storeKeyFingerprint),
            "storeKeys": storeKeys(),
            "defaultAccount": accounts.registry.defaultID.map { .string($0.uuidString.lowercased()) } ?? .null,
            "events": ["seq": .number(Double(events.latestSeq)), "subscribers": .number(Double(events.subscriberCount)),
                       "largestBacklog": .number(Double(events.largestBacklog))],
            "storeUnavailable": outage.map { ["reason": .string($0.reason), "since": AccountView.timestamp($0.since),
                                              "failedWrites": .number(Double($0.failedWrites))] } ?? .null,
        ]
        #if DEBUG
        // For the end-to-end hop test (docs/PROTOCOL.md): debug builds only.
        status["debug"] = ["loopJobs": .number(Double(LoopJobCount.current))]
        #endif
        return .object(status)
    }
}

/// Facts about this daemon for `daemon.info`.
struct DaemonInfo: Sendable {
    static let version = blueskydVersion
    let socketPath: String
    /// The XRPC gateway's socket, nil when it is off.
    let gatewaySocketPath: String?
    /// The gateway's loopback TCP listener, when configured.
    let loopbackGateway: GatewayServer?
    /// The metrics socket, nil when off.
    var metricsSocketPath: String? = nil
    /// The metrics' loopback TCP listener, when configured.
    var loopbackMetrics: GatewayServer? = nil
    let stateDirectory: String
    let startedAt: Date
    /// The `[[client]]` sockets (what a sandbox hides beside the main ones).
    var clientSocketPaths: [String] = []
    /// Which store key this host opens the store with (`StoreKey.keyFingerprint`): after a
    /// `store rekey`, the hosts that still hold the old one show it.
    var storeKeyFingerprint = ""

    var json: JSONValue {
        [
            "name": "blueskyd",
            "version": .string(Self.version),
            "pid": .number(Double(getpid())),
            "uid": .number(Double(getuid())),
            "socket": .string(socketPath),
            "gatewaySocket": gatewaySocketPath.map(JSONValue.string) ?? .null,
            // With the port bound, which `gateway_listen` may leave to the kernel (port 0).
            "gatewayListen": loopbackGateway.map { .string($0.boundDescription) } ?? .null,
            "metricsSocket": metricsSocketPath.map(JSONValue.string) ?? .null,
            "metricsListen": loopbackMetrics.map { .string($0.boundDescription) } ?? .null,
            "stateDirectory": .string(stateDirectory),
            "startedAt": AccountView.timestamp(startedAt),
        ]
    }
}
