import ATTestbed

/// How a benchmark's testbed is configured: the same in a child process (passed as arguments
/// of `blueskyd-bench upstream`) and in this one.
struct UpstreamSettings: Sendable {
    /// How often the DPoP nonces of the PDS and its authorization server rotate.
    var nonceRotationSeconds: Int
    /// How long the testbed waits before answering a refresh (after rotating the tokens).
    var refreshLatencyMilliseconds = 0
    /// App-password access JWTs. A day by default: nothing is refreshed while measuring.
    var accessTokenLifetimeSeconds = 24 * 3600
    /// OAuth access tokens (`expires_in`), also a day by default.
    var oauthAccessTokenLifetimeSeconds = 24 * 3600

    func configure(_ configuration: inout TestbedConfiguration) {
        configuration.accessTokenLifetime = .seconds(accessTokenLifetimeSeconds)
        // Room for the gateway-upload section's 100 MB blob.
        configuration.maxRequestBodyBytes = 128 << 20
        configuration.oauthAccessTokenLifetime = .seconds(oauthAccessTokenLifetimeSeconds)
        configuration.dpopNonceRotationPeriod = .seconds(nonceRotationSeconds)
        configuration.refreshLatency = .milliseconds(refreshLatencyMilliseconds)
    }

    /// The options of `blueskyd-bench upstream` that reproduce these settings.
    var arguments: [String] {
        ["--dpop-nonce-rotation-seconds", String(nonceRotationSeconds),
         "--refresh-latency-ms", String(refreshLatencyMilliseconds),
         "--access-token-lifetime-seconds", String(accessTokenLifetimeSeconds),
         "--oauth-access-token-lifetime-seconds", String(oauthAccessTokenLifetimeSeconds)]
    }

    /// For the report: what differs from a plain testbed.
    var summary: String {
        var parts = ["DPoP nonces rotating every \(nonceRotationSeconds) s"]
        if refreshLatencyMilliseconds > 0 { parts.append("refreshes answered after \(refreshLatencyMilliseconds) ms") }
        if accessTokenLifetimeSeconds != 24 * 3600 || oauthAccessTokenLifetimeSeconds != 24 * 3600 {
            parts.append("access tokens living \(accessTokenLifetimeSeconds) s (app password) and "
                + "\(oauthAccessTokenLifetimeSeconds) s (OAuth)")
        }
        return parts.joined(separator: ", ")
    }
}
