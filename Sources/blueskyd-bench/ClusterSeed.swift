import ATTestbed
import DaemonHarness
import DPoP
import Foundation

/// The cluster section's database: a PostgreSQL server of its own, one tenant, and accounts
/// written through the same store blueskyd uses (sealed with the key every host gets), over
/// one connection pool for the whole section.
struct ClusterDatabase {
    /// The tables' owner, which row-level security holds to the tenant of its name.
    static let tenant = SharedStoreHosts.ownerTenant
    static let name = "blueskyd"

    let server: PostgresServer
    let url: String
    let password: String
    let seeding: SeededSharedStore
    var keyHex: String { seeding.keyHex }

    static func start(directory: String) async throws -> ClusterDatabase {
        let server = try PostgresServer.start(in: directory + "/postgres", settings: DatabaseReading.serverSettings)
        do {
            let (url, password) = try SharedStoreHosts.createDatabase(Self.name, on: server)
            try DatabaseReading.prepare(server, database: Self.name)
            let seeding = try await SeededSharedStore(url: url, password: password, tenant: tenant,
                                                keyDirectory: directory + "/seeding")
            return ClusterDatabase(server: server, url: url, password: password, seeding: seeding)
        } catch {
            server.destroy()
            throw error
        }
    }

    /// The database's own counters now (see `DatabaseReading`).
    func reading() throws -> DatabaseReading { try DatabaseReading.read(server, database: Self.name) }

    func stop() async {
        await seeding.close()
        server.destroy()
    }

    /// The configuration every host reads; its lease is `leaseSeconds`, and each host sends one
    /// server `perServer` refreshes at once (and at least as many overall).
    func writeConfiguration(directory: String, leaseSeconds: Int, perServer: Int) throws -> String {
        try SharedStoreHosts.writeConfiguration(in: directory, url: url, password: password, tenant: Self.tenant,
                                                extraLines: ["lease_seconds = \(leaseSeconds)",
                                                             "max_concurrent_refreshes = \(max(64, perServer))",
                                                             "max_concurrent_refreshes_per_host = \(perServer)"])
    }

    /// Idle app-password accounts (tokens valid for a day), due when blueskyd would refresh
    /// them: 6 minutes before their expiry.
    func seedIdle(count: Int, pdsURL: String, progress: ProgressLog) async throws {
        let now = Date()
        try await seeding.write(count: count, batchSize: FakeAccounts.batchSize, account: { index in
            var account = FakeAccounts.account(index: index, pdsURL: pdsURL, now: now)
            account.record.isDefault = false  // a default goes one row per statement
            return account
        }, due: { $0.accessExpiresAt?.addingTimeInterval(-360) }, written: { written in
            if written % 100_000 < FakeAccounts.batchSize { progress.say("cluster: \(written)/\(count) accounts written") }
        })
    }

    /// OAuth accounts for minted sessions, not due until `makeDue` says so.
    func seedRefreshable(sessions: ArraySlice<MintedOAuthSession>, keys: ArraySlice<DPoPKey>, issuer: String,
                         pdsURL: String) async throws -> [UUID] {
        let (sessions, keys) = (Array(sessions), Array(keys))
        return try await seeding.write(count: sessions.count, batchSize: FakeAccounts.batchSize, account: { index in
            SeededOAuthAccounts.account(sessions[index], key: keys[index], isDefault: false, issuer: issuer, pdsURL: pdsURL,
                                        issuedAt: sessions[index].accessExpiresAt.addingTimeInterval(-RefreshCapacityBench.seededTokenAge))
        }, due: { _ in .distantFuture })
    }
}
