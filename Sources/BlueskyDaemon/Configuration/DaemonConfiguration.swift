import AccountStoreCore
import Foundation
import JSONRPC
import Logging
import SystemdGlue
import WebBasics

/// Everything blueskyd can be told, with its defaults.
///
/// Precedence: command line > environment > configuration file > these defaults.
public struct DaemonConfiguration: Sendable, Equatable {
    /// Where the registry, its key and the instance lock live (`$XDG_STATE_HOME/blueskyd`).
    public var stateDirectory: String
    /// The JSON-RPC socket (`$XDG_RUNTIME_DIR/blueskyd/blueskyd.sock`).
    public var socketPath: String
    /// The XRPC gateway's socket: nil puts it beside the JSON-RPC socket (`xrpc.sock`), ""
    /// turns the gateway off.
    public var gatewaySocket: String?
    /// Also serve the gateway on this loopback TCP address (nil: not).
    public var gatewayListen: LoopbackAddress?
    /// The metrics socket (Prometheus text at GET /metrics): nil puts it beside the JSON-RPC
    /// socket (`metrics.sock`), "" turns it off.
    public var metricsSocket: String?
    /// Also serve the metrics on this loopback TCP address, to any local user (nil: not).
    public var metricsListen: LoopbackAddress?
    /// Series per account (labelled with its DID) besides the totals; off by default, since
    /// their number grows with the accounts.
    public var metricsPerAccount: Bool = false
    /// Longest accepted request line, in bytes.
    public var maxLineBytes: Int
    /// Requests one connection may have in flight before the daemon stops reading it.
    public var maxRequestsPerConnection: Int
    /// DNS servers (`host` or `host:port`) for handle TXT lookups; empty means /etc/resolv.conf's.
    public var nameservers: [String]
    /// The did:plc directory.
    public var plcURL: String
    /// A PEM file of extra certificate authorities to trust (besides the system's).
    public var extraCAFile: String?
    /// Allow plain http to loopback addresses (development servers only).
    public var allowInsecureLoopback: Bool
    /// Refresh this long before the access token expires (at most a quarter of its lifetime).
    public var refreshAhead: Duration
    /// First and longest wait between retries after a transient failure.
    public var retryInitial: Duration
    public var retryMax: Duration
    /// Refreshes running at once across all accounts.
    public var maxConcurrentRefreshes: Int
    /// Refreshes running at once against one server (authorization server or PDS).
    public var maxConcurrentRefreshesPerHost: Int
    /// Timeout of one upstream request.
    public var upstreamTimeout: Duration
    public var logLevel: Logger.Level
    /// Where logs go: the journal, the console, or `auto` (the journal when stderr is it).
    public var logTarget: LogTarget
    /// The refresh concurrency caps, as the scheduler takes them.
    var refreshLimits: RefreshLimits {
        RefreshLimits(overall: maxConcurrentRefreshes, perServer: min(maxConcurrentRefreshesPerHost, maxConcurrentRefreshes))
    }

    /// The rules an account's dates follow.
    var lifecycleRules: AccountLifecycle.Rules {
        AccountLifecycle.Rules(refreshAhead: refreshAhead, backoff: Backoff(initial: retryInitial, maximum: retryMax))
    }

    /// The OAuth client blueskyd presents (loopback by default; hosted or confidential when set).
    public var oauthClient: OAuthClientSettings

    /// A PostgreSQL database shared with other hosts (`postgresql://user@host/db`); nil keeps the
    /// accounts in SQLite in the state directory.
    public var storeURL: String?
    /// The database password's file; the systemd credential `blueskyd-store-password` wins.
    public var storePasswordFile: String?
    /// Whose accounts this daemon keeps in a shared store (default: the Unix user's name).
    public var tenant: String?
    /// This host's name in refresh leases (default: the machine's host name).
    public var hostName: String?
    /// How long a refresh lease holds before another host may take the account over.
    public var leaseDuration: Duration
    /// Connections to the shared store for queries.
    public var storeConnections: Int
    /// Restricted clients: sockets of their own, held to a policy (`[[client]]`).
    public var clients: [ClientSettings] = []
    /// OAuth 2.0 servers named for logins (`[[provider]]`); applied again on reload.
    public var providers: [ProviderSettings] = []

    /// Where the gateway listens, or nil when it is off.
    public var gatewaySocketPath: String? { besideSocket(gatewaySocket, name: "xrpc.sock") }

    /// Where the metrics are served, or nil when they are not.
    public var metricsSocketPath: String? { besideSocket(metricsSocket, name: "metrics.sock") }

    /// `setting` as given ("" meaning off), or `name` in the JSON-RPC socket's directory.
    private func besideSocket(_ setting: String?, name: String) -> String? {
        if let setting { return setting.isEmpty ? nil : setting }
        let directory = PrivateFiles.directory(of: socketPath)
        return (directory.isEmpty ? "." : directory) + "/" + name
    }

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        stateDirectory = Self.defaultStateDirectory(environment: environment)
        socketPath = SocketLocation.defaultPath(environment: environment)
        gatewaySocket = nil
        gatewayListen = nil
        metricsSocket = nil
        metricsListen = nil
        // Room for an upload (`inputBase64`) of a 48 MB file: blobs travel inside one line.
        maxLineBytes = 64 << 20
        maxRequestsPerConnection = 64
        nameservers = []
        plcURL = "https://plc.directory"
        extraCAFile = nil
        allowInsecureLoopback = false
        refreshAhead = .seconds(300)
        retryInitial = .seconds(5)
        retryMax = .seconds(600)
        maxConcurrentRefreshes = RefreshLimits.default.overall
        maxConcurrentRefreshesPerHost = RefreshLimits.default.perServer
        upstreamTimeout = .seconds(30)
        logLevel = .info
        logTarget = .auto
        oauthClient = OAuthClientSettings()
        storeURL = nil
        storePasswordFile = nil
        tenant = nil
        hostName = nil
        leaseDuration = .seconds(60)
        storeConnections = 4
    }

    static func defaultStateDirectory(environment: [String: String]) -> String {
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") {
            return state + "/blueskyd"
        }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return home + "/.local/state/blueskyd"
    }
}
