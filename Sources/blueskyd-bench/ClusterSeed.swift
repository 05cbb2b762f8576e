import ATTestbed
import BlueskyStore
import Crypto
import DaemonHarness
import DPoP
import Foundation
import Logging
import PostgresStore

/// The cluster section's database: a PostgreSQL server of its own, one tenant, and accounts
/// written through the same store blueskyd uses (sealed with the key every host gets), over
/// one connection pool for the whole section.
struct ClusterDatabase {
    static let user = "blueskyd"
    static let name = "blueskyd"
    static let tenant = "bench"

    let server: PostgresServer
    let password: String
    let keyHex: String
    let store: PostgresAccountStore

    static func start(directory: String) throws -> ClusterDatabase {
        let server = try PostgresServer.start(in: directory + "/postgres")
        do {
            let password = PostgresServer.randomPassword()
            try server.createDatabase(name, owner: user, password: password)
            // The key as the hosts will read it: through a key file.
            let keyHex = SharedStoreHosts.randomKeyHex()
            try SharedStoreHosts.provisionKey(keyHex, stateDirectory: directory + "/seeding")
            let key = try StoreKey.load(keyFile: URL(fileURLWithPath: directory + "/seeding/store.key"), environment: [:])
            let settings = try PostgresStoreSettings(url: url(server), password: password, tenant: tenant)
            let store = try PostgresAccountStore(
                settings: settings, key: key, hostName: "bench",
                logger: Logger(label: "bench.store", factory: { _ in SwiftLogNoOpLogHandler() }))
            return ClusterDatabase(server: server, password: password, keyHex: keyHex, store: store)
        } catch {
            server.destroy()
            throw error
        }
    }

    private static func url(_ server: PostgresServer) -> String {
        server.url(user: user, database: name) + "?sslmode=disable"
    }

    func stop() {
        try? store.close()
        server.destroy()
    }

    /// The configuration every host reads; its lease is `leaseSeconds`.
    func writeConfiguration(directory: String, leaseSeconds: Int) throws -> String {
        try SharedStoreHosts.writeConfiguration(in: directory, url: Self.url(server), password: password, tenant: Self.tenant,
                                                extraLines: ["lease_seconds = \(leaseSeconds)"])
    }

    /// Writes `count` accounts made by `account` in batches, each with the due date `due`
    /// gives it; `progress` hears every 100,000. Returns their ids.
    @discardableResult
    func write(count: Int, progress: ProgressLog? = nil, account: (Int) -> (record: AccountRecord, secrets: AccountSecrets),
               due: (AccountRecord) -> Date?) throws -> [UUID] {
        var ids: [UUID] = []
        ids.reserveCapacity(count)
        for start in stride(from: 0, to: count, by: FakeAccounts.batchSize) {
            let batch = (start..<min(count, start + FakeAccounts.batchSize)).map(account)
            try store.insert(contentsOf: batch)
            try store.setRefreshDue(batch.map { ($0.record.id, due($0.record)) })
            ids += batch.map(\.record.id)
            if let progress, ids.count % 100_000 < FakeAccounts.batchSize {
                progress.say("cluster: \(ids.count)/\(count) accounts written")
            }
        }
        return ids
    }

    /// Idle app-password accounts (tokens valid for a day), due when blueskyd would refresh
    /// them: 6 minutes before their expiry.
    func seedIdle(count: Int, pdsURL: String, progress: ProgressLog) throws {
        let now = Date()
        try write(count: count, progress: progress, account: { index in
            var account = FakeAccounts.account(index: index, pdsURL: pdsURL, now: now)
            account.record.isDefault = false  // a default goes one row per statement
            return account
        }, due: { $0.accessExpiresAt?.addingTimeInterval(-360) })
    }

    /// OAuth accounts for minted sessions, not due until `makeDue` says so.
    func seedRefreshable(sessions: ArraySlice<MintedOAuthSession>, keys: ArraySlice<DPoPKey>, issuer: String,
                         pdsURL: String) throws -> [UUID] {
        let (sessions, keys) = (Array(sessions), Array(keys))
        return try write(count: sessions.count, account: { index in
            OAuthFakeAccounts.account(sessions[index], key: keys[index], isDefault: false, issuer: issuer, pdsURL: pdsURL,
                                      issuedAt: sessions[index].accessExpiresAt.addingTimeInterval(-RefreshCapacityBench.seededTokenAge))
        }, due: { _ in .distantFuture })
    }

    /// Makes accounts due now: the start of an expiry storm, as the hosts see it.
    func makeDue(_ ids: [UUID]) throws {
        let now = Date()
        try store.setRefreshDue(ids.map { ($0, now) })
    }
}
