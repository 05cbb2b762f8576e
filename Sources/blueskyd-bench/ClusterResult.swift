import Foundation

/// What the cluster section measured.
struct ClusterResult: Codable, Sendable {
    var accounts: Int
    var stormAccounts: Int
    var tokenEndpointLatencyMilliseconds: Int
    var leaseSeconds: Int
    /// Each host's limit of refreshes at once to one server.
    var refreshesPerServer: Int
    var seedSeconds: Double?
    /// From starting the three hosts together until all answered.
    var startSeconds: Double?
    var accountsLoaded: [Int] = []
    var hostRSSKiB: [Int] = []
    /// From the storm's accounts falling due until the last was refreshed.
    var stormSeconds: Double?
    /// Refreshes per second between 10 % and 90 % of the storm, by the testbed's clock.
    var stormRate: Double?
    /// Tokens each host rotated during the storm.
    var rotatedByHost: [Int] = []
    /// What the storm cost the database and the hosts, per refresh.
    var stormCost: DatabaseCost?
    /// From the SIGKILL until every account of the second storm was refreshed.
    var failoverSeconds: Double?
    var totals: OAuthTotals?
    var finalActive: [Int] = []
    /// Accounts needing a new login after the kill: refreshes in flight when the host died.
    var needsLogin = 0
    var postgresLatency: LatencyResult?
    var sqliteLatency: LatencyResult?
    var error: String?

    func lines() -> [String] {
        var lines = ["10. Cluster: \(ClusterBench.hostCount) blueskyd hosts on one PostgreSQL database with \(accounts) accounts; "
            + "\(stormAccounts) OAuth accounts fall due at once, token endpoint answering after \(tokenEndpointLatencyMilliseconds) ms; "
            + "each host sends it \(refreshesPerServer) at once (bound \(format(bound, 0)) refreshes/s)"]
        if let error { lines.append("   failed: \(error)") }
        lines.append("   setup: writing the database \(seconds(seedSeconds)), starting the hosts together \(seconds(startSeconds)); "
            + "accounts loaded \(accountsLoaded.map(String.init).joined(separator: ", ")); "
            + "RSS \(hostRSSKiB.map { mebibytes($0) }.joined(separator: ", "))")
        if let stormRate, let stormSeconds {
            lines.append("   storm: \(format(stormRate, 1)) refreshes/s sustained (10–90 %), all \(stormAccounts) in \(format(stormSeconds, 1)) s; "
                + "tokens rotated per host \(rotatedByHost.map(String.init).joined(separator: ", "))")
        }
        if let stormCost { lines += stormCost.lines() }
        if let failoverSeconds {
            lines.append("   failover: one host SIGKILLed a third into a second storm; every account refreshed "
                + "\(format(failoverSeconds, 1)) s after the kill (lease \(leaseSeconds) s)")
        }
        if let totals {
            lines.append("   at the authorization server: \(totals.refreshes) refreshes, replays \(totals.refreshTokenReplays), "
                + "invalid grants \(totals.invalidGrants); active accounts on the survivors \(finalActive.map(String.init).joined(separator: ", "))")
            lines.append("   needing a new login: \(needsLogin) (refreshes the killed host had in flight: the server rotated, "
                + "the host died before saving; the unclosable window)")
        }
        if postgresLatency != nil {
            lines.append("   proxy (the PostgreSQL host holds every account and shares the CPU with the cluster; "
                + "the SQLite daemon holds one):")
        }
        for (name, latency) in [("PostgreSQL host", postgresLatency), ("SQLite daemon", sqliteLatency)] {
            guard let latency else { continue }
            lines.append("   proxy via the \(name): added p50 \(format(latency.addedP50, 1)) µs, p99 \(format(latency.addedP99, 1)) µs "
                + "(daemon p50 \(format(latency.daemon.p50, 1)) µs, direct \(format(latency.direct.p50, 1)) µs)")
        }
        return lines
    }

    /// Refreshes per second the hosts' limits allow: every host's refreshes to the one server,
    /// each taking the token endpoint's latency.
    var bound: Double {
        Double(ClusterBench.hostCount * refreshesPerServer) * 1000 / Double(max(1, tokenEndpointLatencyMilliseconds))
    }

    private func seconds(_ value: Double?) -> String { value.map { format($0, 1) + " s" } ?? "?" }
}
