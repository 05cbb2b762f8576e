import ATTestbed
import BlueskyStore
import Crypto
import DaemonHarness
import DPoP
import Foundation
import Logging
import PostgresStore

/// The cluster section's database: a PostgreSQL server of its own, one tenant, and accounts
/// written through the same store blueskyd uses (sealed with the key every host gets).
struct ClusterDatabase {
    static let user = "blueskyd"
    static let name = "blueskyd"
    static let tenant = "bench"

    let server: PostgresServer
    let password: String
    let key: SymmetricKey
    let keyHex: String

    static func start(directory: String) throws -> ClusterDatabase {
        let server = try PostgresServer.start(in: directory + "/postgres")
        let password = PostgresServer.randomPassword()
        try server.createDatabase(name, owner: user, password: password)
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255) }
        return ClusterDatabase(server: server, password: password, key: SymmetricKey(data: bytes),
                               keyHex: bytes.map { String(format: "%02x", $0) }.joined())
    }

    var url: String { server.url(user: Self.user, database: Self.name) + "?sslmode=disable" }

    func openStore() throws -> PostgresAccountStore {
        let settings = try PostgresStoreSettings(url: url, password: password, tenant: Self.tenant)
        return try PostgresAccountStore(settings: settings, key: key, hostName: "bench",
                                        logger: Logger(label: "bench.store", factory: { _ in SwiftLogNoOpLogHandler() }))
    }

    /// The configuration file every host reads, with the password in a file of its own.
    func writeConfiguration(directory: String) throws -> String {
        let passwordFile = directory + "/store-password"
        try (password + "\n").write(toFile: passwordFile, atomically: true, encoding: .utf8)
        chmod(passwordFile, 0o600)
        let config = directory + "/blueskyd.toml"
        try """
            store_url = "\(url)"
            store_password_file = "\(passwordFile)"
            tenant = "\(Self.tenant)"
            """.write(toFile: config, atomically: true, encoding: .utf8)
        return config
    }

    /// A host's state directory, holding the shared store key as a deployment provisions it.
    func provisionHost(stateDirectory: String) throws {
        try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        FileManager.default.createFile(atPath: stateDirectory + "/store.key", contents: Data(keyHex.utf8),
                                       attributes: [.posixPermissions: 0o600])
    }

    /// Writes idle app-password accounts (tokens valid for a day) with their real due dates,
    /// in batches; `progress` hears every 100,000.
    func seedIdle(count: Int, pdsURL: String, progress: ProgressLog) throws {
        let store = try openStore()
        defer { try? store.close() }
        let now = Date()
        for start in stride(from: 0, to: count, by: FakeAccounts.batchSize) {
            let batch = (start..<min(count, start + FakeAccounts.batchSize)).map {
                FakeAccounts.account(index: $0, pdsURL: pdsURL, now: now)
            }
            try store.insert(contentsOf: batch)
            // Due when blueskyd would refresh them, 6 minutes before their expiry.
            try store.setRefreshDue(batch.map { ($0.record.id, $0.record.accessExpiresAt?.addingTimeInterval(-360)) })
            if (start + batch.count) % 100_000 < FakeAccounts.batchSize {
                progress.say("cluster: \(start + batch.count)/\(count) idle accounts written")
            }
        }
    }

    /// Writes OAuth accounts for minted sessions, not due until `makeDue` says so.
    func seedRefreshable(sessions: [MintedOAuthSession], keys: [DPoPKey], issuer: String, pdsURL: String,
                         firstIndex: Int) throws -> [UUID] {
        let store = try openStore()
        defer { try? store.close() }
        var ids: [UUID] = []
        for start in stride(from: 0, to: sessions.count, by: FakeAccounts.batchSize) {
            let batch = (start..<min(sessions.count, start + FakeAccounts.batchSize)).map { index in
                OAuthFakeAccounts.account(sessions[index], key: keys[index], isDefault: false, issuer: issuer,
                                          pdsURL: pdsURL, issuedAt: sessions[index].accessExpiresAt.addingTimeInterval(-3600))
            }
            try store.insert(contentsOf: batch)
            try store.setRefreshDue(batch.map { ($0.record.id, Date.distantFuture) })
            ids += batch.map(\.record.id)
        }
        return ids
    }

    /// Makes accounts due now: the start of an expiry storm, as the hosts see it.
    func makeDue(_ ids: [UUID]) throws {
        let store = try openStore()
        defer { try? store.close() }
        let now = Date()
        try store.setRefreshDue(ids.map { ($0, now) })
    }
}
