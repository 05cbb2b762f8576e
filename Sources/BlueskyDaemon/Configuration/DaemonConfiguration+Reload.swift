import Foundation

/// What a reload does with a newly read configuration.
public struct ReloadPlan: Sendable, Equatable {
    /// The configuration to run on from now: the new values of the keys that can change while
    /// running, the old values of the others (so a later reload still reports them).
    public var effective: DaemonConfiguration
    /// File keys whose new values take effect now.
    public var applied: [String]
    /// File keys that changed but take effect only after a restart.
    public var needsRestart: [String]
}

extension DaemonConfiguration {
    /// Keys a reload applies to the running daemon, in file order.
    static let runtimeKeys: Set<String> = [
        "log_level", "refresh_ahead_seconds", "retry_initial_seconds", "retry_max_seconds",
        "max_concurrent_refreshes", "max_concurrent_refreshes_per_host", "provider",
    ]

    /// Compares this (running) configuration with `new`, key by key.
    public func reloadPlan(to new: DaemonConfiguration) -> ReloadPlan {
        var effective = self
        var applied: [String] = []
        var needsRestart: [String] = []
        for key in Self.fileKeys where !Self.sameValue(of: key, self, new) {
            if Self.runtimeKeys.contains(key) {
                Self.copyValue(of: key, from: new, to: &effective)
                applied.append(key)
            } else {
                needsRestart.append(key)
            }
        }
        return ReloadPlan(effective: effective, applied: applied, needsRestart: needsRestart)
    }

    private static func sameValue(of key: String, _ a: DaemonConfiguration, _ b: DaemonConfiguration) -> Bool {
        switch key {
        case "state_directory": a.stateDirectory == b.stateDirectory
        case "socket": a.socketPath == b.socketPath
        case "gateway_socket": a.gatewaySocket == b.gatewaySocket
        case "gateway_listen": a.gatewayListen == b.gatewayListen
        case "metrics_socket": a.metricsSocket == b.metricsSocket
        case "metrics_listen": a.metricsListen == b.metricsListen
        case "metrics_per_account": a.metricsPerAccount == b.metricsPerAccount
        case "max_line_bytes": a.maxLineBytes == b.maxLineBytes
        case "max_requests_per_connection": a.maxRequestsPerConnection == b.maxRequestsPerConnection
        case "nameservers": a.nameservers == b.nameservers
        case "plc_url": a.plcURL == b.plcURL
        case "ca_file": a.extraCAFile == b.extraCAFile
        case "allow_insecure_loopback": a.allowInsecureLoopback == b.allowInsecureLoopback
        case "refresh_ahead_seconds": a.refreshAhead == b.refreshAhead
        case "retry_initial_seconds": a.retryInitial == b.retryInitial
        case "retry_max_seconds": a.retryMax == b.retryMax
        case "max_concurrent_refreshes": a.maxConcurrentRefreshes == b.maxConcurrentRefreshes
        case "max_concurrent_refreshes_per_host": a.maxConcurrentRefreshesPerHost == b.maxConcurrentRefreshesPerHost
        case "upstream_timeout_seconds": a.upstreamTimeout == b.upstreamTimeout
        case "log_level": a.logLevel == b.logLevel
        case "log_target": a.logTarget == b.logTarget
        case "oauth_client_id": a.oauthClient.clientID == b.oauthClient.clientID
        case "oauth_redirect_uri": a.oauthClient.redirectURI == b.oauthClient.redirectURI
        case "oauth_client_auth": a.oauthClient.authentication == b.oauthClient.authentication
        case "oauth_scope": a.oauthClient.scope == b.oauthClient.scope
        case "oauth_client_name": a.oauthClient.clientName == b.oauthClient.clientName
        case "oauth_client_uri": a.oauthClient.clientURI == b.oauthClient.clientURI
        case "store_url": a.storeURL == b.storeURL
        case "store_password_file": a.storePasswordFile == b.storePasswordFile
        case "tenant": a.tenant == b.tenant
        case "host_name": a.hostName == b.hostName
        case "lease_seconds": a.leaseDuration == b.leaseDuration
        case "store_connections": a.storeConnections == b.storeConnections
        case "client": a.clients == b.clients
        case "provider": a.providers == b.providers
        default: preconditionFailure("fileKeys and reloadPlan disagree about '\(key)'")
        }
    }

    private static func copyValue(of key: String, from new: DaemonConfiguration, to target: inout DaemonConfiguration) {
        switch key {
        case "log_level": target.logLevel = new.logLevel
        case "refresh_ahead_seconds": target.refreshAhead = new.refreshAhead
        case "retry_initial_seconds": target.retryInitial = new.retryInitial
        case "retry_max_seconds": target.retryMax = new.retryMax
        case "max_concurrent_refreshes": target.maxConcurrentRefreshes = new.maxConcurrentRefreshes
        case "max_concurrent_refreshes_per_host": target.maxConcurrentRefreshesPerHost = new.maxConcurrentRefreshesPerHost
        case "provider": target.providers = new.providers
        default: preconditionFailure("'\(key)' is not a runtime key")
        }
    }
}
