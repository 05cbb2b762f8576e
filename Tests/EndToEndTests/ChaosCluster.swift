import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

/// Three blueskyd hosts of one tenant, each reaching the database through its own relay (so
/// that one host's packets can be dropped), and the faults `ClusterChaosTests` injects.
final class ChaosCluster: @unchecked Sendable {
    enum Fault: String, CaseIterable, Hashable {
        case kill = "host kills"
        case databaseRestart = "database restarts"
        case packetDrop = "packet drops"

        var target: String { self == .databaseRestart ? "the database" : "one host" }
    }

    /// The tables' owner, which row-level security holds to the tenant of its name.
    static let tenant = SharedStoreHosts.ownerTenant
    private let directory: TemporaryDirectory
    private let database: PostgresServer
    private let relays: [TCPRelay]
    private let testbed: Testbed
    private let seeding: SeededSharedStore
    private let configs: [String]
    private var hosts: [DaemonProcess]
    /// Every account's DID, and whether it signs in with OAuth.
    private var accounts: [String: Bool] = [:]
    private var minted = 0

    private init(directory: TemporaryDirectory, database: PostgresServer, relays: [TCPRelay], testbed: Testbed,
                 seeding: SeededSharedStore, configs: [String], hosts: [DaemonProcess]) {
        self.directory = directory
        self.database = database
        self.relays = relays
        self.testbed = testbed
        self.seeding = seeding
        self.configs = configs
        self.hosts = hosts
    }

    /// Leases of 20 s: a host is alive for 15 s after each beat (every 5 s), longer than any
    /// drop or restart here lasts, so none of them may cost an account.
    static func start(in directory: TemporaryDirectory, url: String, password: String, database: PostgresServer,
                      relays: [TCPRelay], testbed: Testbed) async throws -> ChaosCluster {
        let seeding = try await SeededSharedStore(url: url, password: password, tenant: tenant,
                                                  keyDirectory: directory.file("seeding"))
        var configs: [String] = []
        var hosts: [DaemonProcess] = []
        do {
            for (index, relay) in relays.enumerated() {
                let relayed = url.replacingOccurrences(of: ":\(database.port)/", with: ":\(relay.port)/")
                let configDirectory = directory.file("config\(index)")
                try FileManager.default.createDirectory(atPath: configDirectory, withIntermediateDirectories: true)
                configs.append(try SharedStoreHosts.writeConfiguration(
                    in: configDirectory, url: relayed, password: password, tenant: tenant,
                    extraLines: ["lease_seconds = 20", "upstream_timeout_seconds = 5"]))
                hosts.append(try await SharedStoreHosts.startHost(index, in: directory.path, keyHex: seeding.keyHex,
                                                                  config: configs[index], testbed: testbed, logLevel: "info"))
            }
        } catch {
            for host in hosts { await host.stop() }
            await seeding.close()
            throw error
        }
        return ChaosCluster(directory: directory, database: database, relays: relays, testbed: testbed, seeding: seeding,
                            configs: configs, hosts: hosts)
    }

    func stop() async {
        for host in hosts { await host.stop() }
        await seeding.close()
    }

    /// OAuth accounts written as a login on another host would (NOTIFY tells the hosts), and
    /// app-password accounts logged in through host 0; returns once every host lists them.
    func addAccounts(oauth: Int, appPassword: Int) async throws {
        for _ in 0..<oauth { try await addOAuthAccount() }
        for index in 0..<appPassword {
            var spec = AccountSpec(name: "app\(index)")
            spec.publishWellKnown = true
            let account = await testbed.createAccount(spec)
            _ = try await hosts[0].call("accounts.add", ["identifier": .string(account.did), "password": .string(account.appPassword)])
            accounts[account.did] = false
        }
        for host in hosts {
            try await waitUntil("host \(host.pid) lists every account", timeout: .seconds(30)) {
                try await self.views(host).count == self.accounts.count
            }
        }
    }

    private func addOAuthAccount() async throws {
        minted += 1
        let session = try SeededOAuthAccounts.mint(at: testbed, names: ["oauth\(minted)"], accessExpiresAt: Date().addingTimeInterval(3))
        try await seeding.write(count: 1, account: { _ in
            SeededOAuthAccounts.account(session[0].session, key: session[0].key, isDefault: false,
                                        issuer: self.testbed.oauthIssuer, pdsURL: self.testbed.pdsURL, issuedAt: Date())
        }, due: { _ in Date() })
        accounts[session[0].session.did] = true
    }

    /// One fault at random, lasting a random while, undone before it returns.
    func injectRandomFault() async throws -> Fault {
        let fault = Fault.allCases.randomElement()!
        let index = Int.random(in: 0..<hosts.count)
        switch fault {
        case .kill:
            await hosts[index].crash()
            try await Task.sleep(for: .milliseconds(Int.random(in: 0..<2000)))
            hosts[index] = try await SharedStoreHosts.startHost(index, in: directory.path, keyHex: seeding.keyHex,
                                                               config: configs[index], testbed: testbed, logLevel: "info")
        case .databaseRestart:
            try await offThePool { [database] in try database.stop(mode: .fast) }
            try await Task.sleep(for: .milliseconds(Int.random(in: 1000..<8000)))
            try await offThePool { [database] in try database.start() }
        case .packetDrop:
            relays[index].drop()
            try await Task.sleep(for: .milliseconds(Int.random(in: 2000..<8000)))
            relays[index].resume()
        }
        return fault
    }

    /// Checks every account as one host lists it. A lost account is counted, and replaced (an
    /// OAuth one by a new account, an app-password one by a new login) so that the next
    /// rounds exercise it too. With `settle`, first waits until no refresh is left unfinished,
    /// in the store or on any host, and every host lists each account in the same state, and
    /// ends with a call for every account through every host.
    ///
    /// A host killed mid-refresh leaves its mark and lease in the store, which no other host
    /// lists: the refresh is settled only when its lease has run out and a host has claimed it
    /// (and met the replayed token, when the kill fell inside the window). The loss that host
    /// finds reaches the others by NOTIFY, a moment later.
    func check(_ tally: inout ClusterTally, settle: Bool) async throws {
        if settle {
            try await waitUntil("no refresh is left marked as started in the store", timeout: .seconds(60)) {
                try await offThePool { [database] in
                    try database.psql("""
                        SELECT count(*) FROM account
                        WHERE refresh_started_at IS NOT NULL AND state <> 'needs-login'
                        """, database: "blueskyd") == "0"
                }
            }
            for host in hosts {
                _ = try await eventually(timeout: .seconds(60)) {
                    try await self.views(host).allSatisfy {
                        $0["state"] == "needs-login" || ($0["state"] == "active" && $0["refreshInterruptedAt"] == .null)
                    }
                }
            }
            try await waitUntil("every host lists each account in the same state", timeout: .seconds(30)) {
                var seen: [[String: String]] = []
                for host in self.hosts {
                    let states = try await self.views(host).map { ($0["did"]?.stringValue ?? "", $0["state"]?.stringValue ?? "") }
                    seen.append(Dictionary(states, uniquingKeysWith: { first, _ in first }))
                }
                return seen.allSatisfy { $0 == seen[0] }
            }
        }
        let host = hosts.randomElement()!
        for view in try await views(host) where view["state"] == "needs-login" {
            let did = view["did"]?.stringValue ?? ""
            let reason = view["stateReason"]?.stringValue ?? ""
            if accounts[did] == false {
                tally.appPasswordLosses += 1
                Issue.record("app-password account \(did) lost: \(reason)")
                let account = try #require(testbed.accounts.first { $0.did == did })
                _ = try await host.call("accounts.add", ["identifier": .string(did), "password": .string(account.appPassword)])
                continue
            }
            if reason.contains("was lost and the server ended the session") {
                tally.explainedOAuthLosses += 1
            } else {
                tally.unexplainedLosses += 1
                Issue.record("OAuth account \(did) lost without explanation: \(reason)")
            }
            _ = try await host.call("accounts.remove", ["account": .string(did)])
            accounts[did] = nil
            try await addOAuthAccount()
        }
        guard settle else { return }
        for host in hosts {
            try await waitUntil("host \(host.pid) has every account active", timeout: .seconds(60)) {
                let views = try await self.views(host)
                return views.count == self.accounts.count && views.allSatisfy { $0["state"] == "active" }
            }
            for did in accounts.keys {
                // A host killed in the last round may still hold an account's lease: the call
                // is told to come back (`UpstreamUnavailable`, retryAfter) until the lease ends.
                var last = "no answer"
                let answered = try await eventually(timeout: .seconds(60)) {
                    do {
                        let reply = try await host.call("xrpc.call", ["nsid": "app.bsky.actor.getProfile", "account": .string(did),
                                                                      "params": ["actor": .string(did)]])
                        last = "\(reply)"
                        return reply["status"] == 200
                    } catch let error as RPCError where error.name == "UpstreamUnavailable" {
                        last = "\(error)"
                        try await Task.sleep(for: .seconds(1))
                        return false
                    }
                }
                #expect(answered, "\(did) through host \(host.pid): \(last)")
            }
        }
    }

    private func views(_ host: DaemonProcess) async throws -> [JSONValue] {
        try await host.call("accounts.list")["accounts"]?.arrayValue ?? []
    }
}
