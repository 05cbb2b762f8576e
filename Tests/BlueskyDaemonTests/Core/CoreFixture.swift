import ATIdentity
import ATOAuth
import AccountStoreCore
import BlueskyHTTP
import Foundation
import JSONRPC
import Logging
import RPCServer
import Synchronization
import Testing
import WebBasics
import XRPC
@testable import BlueskyDaemon

/// The daemon's core in process, with no socket, network or database: the real sessions,
/// manager, scheduler inbox and methods over an in-memory store, a scripted PDS and a clock the
/// test sets. Races a real system shows only by chance are set up here on purpose, by holding a
/// store write (`store.holdWrites`) or a server's answer (`pds.holdRefreshes`).
final class CoreFixture: Sendable {
    let store: MemoryAccountStore
    let pds = ScriptedPDS()
    let clock = ManualClock()
    let environment: SessionEnvironment
    let manager: AccountManager
    let scheduler: RefreshScheduler
    let methods: DaemonMethods

    init(database: MemoryDatabase = MemoryDatabase(), leaseOwner: String = "memory") throws {
        let store = MemoryAccountStore(database: database, leaseOwner: leaseOwner)
        self.store = store
        let clock = clock
        let logger = Logger(label: "core-tests", factory: { _ in SwiftLogNoOpLogHandler() })
        let scheduler = RefreshScheduler(limits: .default, now: { clock.now })
        self.scheduler = scheduler
        environment = SessionEnvironment(
            store: store, http: pds, sessions: LegacySessionClient(http: pds, timeout: .seconds(5)),
            oauth: OAuthEnvironment(http: pds, policy: OAuthURLPolicy(allowInsecureLoopback: false), timeout: .seconds(5),
                                    now: { clock.now }),
            rules: AccountLifecycle.Rules(refreshAhead: .seconds(300), backoff: Backoff(initial: .seconds(5), maximum: .seconds(600))),
            upstreamTimeout: .seconds(5), logger: logger, now: { clock.now },
            schedule: { id, due, server in scheduler.note(id, due, server: server) })
        let identity = IdentityResolver(http: pds, dns: try DNSTXTResolver(nameservers: ["127.0.0.1:9"]),
                                        plcURL: URL(string: "https://plc.test")!, requestTimeout: .seconds(5), logger: logger)
        manager = AccountManager(store: store, scheduler: scheduler, environment: environment, identity: identity)
        methods = DaemonMethods(accounts: manager, proxy: XRPCProxy(registry: environment.registry, environment: environment),
                                info: DaemonInfo(socketPath: "/nonexistent", gatewaySocketPath: nil, loopbackGateway: nil, stateDirectory: "/nonexistent", startedAt: clock.now),
                                isStopping: { false }, logger: logger)
    }

    /// An app-password account stored and tracked, whose access token expires in `expiresIn`.
    @discardableResult
    func addAccount(_ name: String = "alice", expiresIn: TimeInterval = 3600, isDefault: Bool = false) async throws -> AccountSession {
        let did = "did:plc:\(name)"
        let record = AccountRecord(did: did, handle: "\(name).test", handleVerified: true, pds: ScriptedPDS.url,
                                   authKind: .appPassword, isDefault: isDefault, createdAt: clock.now, lastRefreshAt: clock.now,
                                   accessExpiresAt: clock.now.addingTimeInterval(expiresIn))
        let secrets = pds.issue(did: did, expiresIn: expiresIn)
        try await store.insert(record, secrets: secrets)
        return await manager.track(record)
    }

    /// The account as the store holds it.
    func stored(_ session: AccountSession) async throws -> AccountRecord {
        try #require(try await store.account(id: session.id))
    }

    /// A method called as a client would, without a socket.
    func call(_ method: String, _ params: JSONValue? = nil) async -> Result<JSONValue, RPCError> {
        await methods.handle(RPCRequest(id: .number(1), method: method, params: params),
                             context: RPCCallContext(connectionID: 1, peer: .init(pid: 1, uid: 0, gid: 0)))
    }
}

/// Wall-clock time a test moves by hand.
final class ManualClock: Sendable {
    private let current = Mutex(Date())
    var now: Date { current.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { current.withLock { $0.addTimeInterval(seconds) } }
}

/// A PDS's app-password session endpoints: `refreshSession` rotates a refresh token once (a
/// spent one is refused as the reference PDS refuses it after its grace period), counts every
/// request, and can hold its answers until a test lets them go.
final class ScriptedPDS: HTTPFetching, Sendable {
    static let url = "https://pds.test"

    private struct State {
        var live: [String: String] = [:]  // refresh token → DID
        var spent: Set<String> = []
        var issued = 0
        var refreshRequests = 0
        var replays = 0
        var gate: (@Sendable () async -> Void)?
        var failures: [InboundResponse] = []
        var deleteRequests = 0
    }

    private let state = Mutex(State())

    var refreshRequests: Int { state.withLock { $0.refreshRequests } }
    /// Spent refresh tokens presented again.
    var replays: Int { state.withLock { $0.replays } }
    /// `deleteSession` requests received.
    var deleteRequests: Int { state.withLock { $0.deleteRequests } }
    /// Refresh tokens of `did` the server still honours.
    func liveRefreshTokens(did: String) -> Int { state.withLock { $0.live.values.filter { $0 == did }.count } }
    /// Whether the server still honours `refreshToken`.
    func isLive(_ refreshToken: String) -> Bool { state.withLock { $0.live[refreshToken] != nil } }

    /// New tokens for `did`: an access JWT expiring in `expiresIn`, a refresh token.
    func issue(did: String, expiresIn: TimeInterval) -> AccountSecrets {
        state.withLock { state in
            state.issued += 1
            let refresh = "refresh-\(did)-\(state.issued)"
            state.live[refresh] = did
            let exp = Int(Date().timeIntervalSince1970 + expiresIn)
            return AccountSecrets(accessToken: Self.jwt(#"{"exp":\#(exp),"sub":"\#(did)"}"#) + ".\(state.issued)",
                                  refreshToken: refresh)
        }
    }

    /// The next refresh answers wait in `gate` (after the server rotated the token).
    func holdRefreshes(_ gate: (@Sendable () async -> Void)?) { state.withLock { $0.gate = gate } }

    /// The next refreshes get these answers instead (the token is not rotated).
    func failNextRefreshes(_ answers: [InboundResponse]) { state.withLock { $0.failures = answers } }

    func send(_ request: OutboundRequest, timeout: Duration) async throws(HTTPError) -> InboundResponse {
        let path = request.url.path
        if path == "/xrpc/com.atproto.server.deleteSession" {
            // As the reference PDS: the refresh token presented is revoked, no other.
            let bearer = request.headers.first { $0.0.lowercased() == "authorization" }?.1 ?? ""
            state.withLock { state in
                state.deleteRequests += 1
                state.live[String(bearer.dropFirst("Bearer ".count))] = nil
            }
            return InboundResponse(status: 200, headers: [], body: [])
        }
        guard path == "/xrpc/com.atproto.server.refreshSession" else {
            return InboundResponse(status: 400, headers: [("Content-Type", "application/json")],
                                   body: Array(#"{"error":"RecordNotFound","message":"no such record"}"#.utf8))
        }
        let bearer = request.headers.first { $0.0.lowercased() == "authorization" }?.1 ?? ""
        let token = String(bearer.dropFirst("Bearer ".count))
        let (answer, gate): (InboundResponse, (@Sendable () async -> Void)?) = state.withLock { state in
            state.refreshRequests += 1
            if !state.failures.isEmpty { return (state.failures.removeFirst(), nil) }
            guard let did = state.live.removeValue(forKey: token) else {
                if state.spent.contains(token) { state.replays += 1 }
                return (Self.error(400, "ExpiredToken", "Token has been revoked"), nil)
            }
            state.spent.insert(token)
            state.issued += 1
            let refresh = "refresh-\(did)-\(state.issued)"
            state.live[refresh] = did
            let exp = Int(Date().timeIntervalSince1970 + 3600)
            let body = #"{"did":"\#(did)","accessJwt":"\#(Self.jwt(#"{"exp":\#(exp),"sub":"\#(did)"}"#)).\#(state.issued)","refreshJwt":"\#(refresh)"}"#
            return (InboundResponse(status: 200, headers: [("Content-Type", "application/json")], body: Array(body.utf8)), state.gate)
        }
        if let gate { await gate() }
        return answer
    }

    static func error(_ status: Int, _ name: String, _ message: String) -> InboundResponse {
        InboundResponse(status: status, headers: [("Content-Type", "application/json")],
                        body: Array(#"{"error":"\#(name)","message":"\#(message)"}"#.utf8))
    }

    static func jwt(_ claims: String) -> String {
        Base64URL.encode(Array(#"{"alg":"none"}"#.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
    }
}

/// A one-shot latch: `wait` returns once `open` was called (before or after).
final class Latch: Sendable {
    private let state = Mutex<(open: Bool, waiters: [UUID: CheckedContinuation<Void, Never>])>((false, [:]))

    func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        waiters.forEach { $0.resume() }
    }

    /// Returns once the latch is open, or records an issue after `limit`: a step of a test
    /// that was never reached fails the test instead of hanging the run.
    func wait(within limit: Duration = .seconds(30), sourceLocation: SourceLocation = #_sourceLocation) async {
        let id = UUID()
        let timer = Task { [self] in
            try? await Task.sleep(for: limit)
            guard !Task.isCancelled, let waiter = state.withLock({ $0.waiters.removeValue(forKey: id) }) else { return }
            Issue.record("the latch was not opened within \(limit)", sourceLocation: sourceLocation)
            waiter.resume()
        }
        await withCheckedContinuation { continuation in
            let open = state.withLock { state -> Bool in
                if !state.open { state.waiters[id] = continuation }
                return state.open
            }
            if open { continuation.resume() }
        }
        timer.cancel()
    }
}
