import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

/// Three real blueskyd hosts on one real PostgreSQL database and the testbed.
@Suite("Several hosts sharing one PostgreSQL store")
struct SharedStoreEndToEndTests {
    static let accountCount = 150
    static let tokenLifetime: Duration = .seconds(8)

    @Test("""
        three hosts: accounts added on any host appear on all; expiry storms refresh each token exactly once; \
        a SIGKILLed host's accounts are taken over; a PostgreSQL restart loses nothing
        """)
    func threeHosts() async throws {
        try HermeticNetwork.require()
        let directory = try TemporaryDirectory("blueskyd-shared")
        let database = try await offThePool { try PostgresServer.start() }
        let testbed = try await Testbed.startInHermeticNetwork(directory: directory.file("testbed")) { config in
            config.accessTokenLifetime = Self.tokenLifetime
        }
        var hosts: [DaemonProcess] = []
        try await withTearDown {
            for host in hosts { await host.stop() }
            try? await testbed.shutdown()
            database.destroy()
            directory.remove()
        } run: {
            let (url, password) = try SharedStoreHosts.createDatabase(on: database)
            let config = try SharedStoreHosts.writeConfiguration(
                in: directory.path, url: url, password: password, tenant: SharedStoreHosts.ownerTenant,
                extraLines: ["lease_seconds = 10", "upstream_timeout_seconds = 5"])
            let key = SharedStoreHosts.randomKeyHex()
            for index in 0..<3 {
                hosts.append(try await SharedStoreHosts.startHost(index, in: directory.path, keyHex: key, config: config,
                                                                  testbed: testbed))
            }
            var accounts: [TestAccount] = []
            for index in 0..<Self.accountCount {
                var spec = AccountSpec(name: "shared\(index)")
                spec.publishWellKnown = true
                accounts.append(await testbed.createAccount(spec))
            }

            // Accounts added on every host (a third each) appear on all three through NOTIFY.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, host) in hosts.enumerated() {
                    let mine = accounts.enumerated().filter { $0.offset % 3 == index }.map(\.element)
                    group.addTask {
                        for account in mine {
                            _ = try await host.call("accounts.add", ["identifier": .string(account.did),
                                                                     "password": .string(account.appPassword)])
                        }
                    }
                }
                try await group.waitForAll()
            }
            for host in hosts {
                try await waitUntil("every host lists every account", timeout: .seconds(30)) {
                    try await host.call("daemon.status")["accounts"]?.intValue == Self.accountCount
                }
            }

            // Expiry storms: every token lives 8 s and all three hosts keep every account; over
            // three rotations, each refresh token is presented once (no reuse, no refusal).
            let before = accounts.map { testbed.stats(did: $0.did) }
            try await Self.callEveryAccount(on: hosts, accounts: accounts)
            try await waitUntil("three rotations of every account", timeout: .seconds(60)) {
                zip(accounts, before).allSatisfy { testbed.stats(did: $0.did).refreshes - $1.refreshes >= 3 }
            }
            try await Self.callEveryAccount(on: hosts, accounts: accounts)
            // The hosts take due accounts from the shared schedule: the work spread over all three.
            let rotated = try await SharedStoreHosts.tokensRotated(hosts)
            let total = rotated.reduce(0, +)
            #expect(total >= 3 * Self.accountCount && rotated.allSatisfy { $0 * 10 >= total },
                    "each host did at least a tenth of the refreshes: \(rotated)")
            for account in accounts {
                let stats = testbed.stats(did: account.did)
                #expect(stats.refreshTokenReuses == 0 && stats.rejectedRefreshes == 0,
                        "\(account.handle): each refresh token was presented once: \(stats)")
            }

            // SIGKILL one host in the middle of refreshes: the others take its accounts over
            // within the lease (10 s) and nothing is lost.
            await hosts[2].crash()
            let killedAt = accounts.map { testbed.stats(did: $0.did).refreshes }
            try await waitUntil("every account refreshed again after the kill", timeout: .seconds(60)) {
                zip(accounts, killedAt).allSatisfy { testbed.stats(did: $0.did).refreshes - $1 >= 2 }
            }
            let survivors = Array(hosts[0..<2])
            try await Self.callEveryAccount(on: survivors, accounts: accounts)
            let reusedAfterKill = accounts.filter { testbed.stats(did: $0.did).refreshTokenReuses > 0 }
            #expect(reusedAfterKill.count <= 4, "only refreshes in flight at the kill may be retried: \(reusedAfterKill.count)")
            #expect(accounts.allSatisfy { testbed.stats(did: $0.did).rejectedRefreshes == 0 })

            // Stop and restart PostgreSQL under load: every host reports the outage, comes back,
            // and no account is lost or left needing a login.
            try await offThePool { try database.stop(mode: .fast) }
            try await waitUntil("a host notices the database is gone", timeout: .seconds(30)) {
                let status = try await survivors[0].call("daemon.status")
                return status["storeUnavailable"] != .null
            }
            try await offThePool { try database.start() }
            let restartedAt = accounts.map { testbed.stats(did: $0.did).refreshes }
            try await waitUntil("every account refreshed after the restart", timeout: .seconds(90)) {
                zip(accounts, restartedAt).allSatisfy { testbed.stats(did: $0.did).refreshes - $1 >= 1 }
            }
            for host in survivors {
                try await waitUntil("the host recovered", timeout: .seconds(60)) {
                    let status = try await host.call("daemon.status")
                    return status["storeUnavailable"] == .null && status["active"]?.intValue == Self.accountCount
                }
            }
            try await Self.callEveryAccount(on: survivors, accounts: accounts)
            #expect(accounts.allSatisfy { testbed.stats(did: $0.did).rejectedRefreshes == 0 })
            let rows = try database.psql("SELECT count(*) FROM account WHERE state = 'active'", database: "blueskyd")
            #expect(rows == "\(Self.accountCount)")
        }
    }

    /// A proxied call for every account on every host, all of which must succeed.
    static func callEveryAccount(on hosts: [DaemonProcess], accounts: [TestAccount]) async throws {
        for host in hosts {
            let outcome = await ConcurrentClients.run(socketPath: host.socketPath, connections: 10,
                                                      requestsPerConnection: (accounts.count + 9) / 10) { connection, index in
                let account = accounts[(connection * ((accounts.count + 9) / 10) + index) % accounts.count]
                return ["nsid": "app.bsky.actor.getProfile", "account": .string(account.did),
                        "params": ["actor": .string(account.did)]]
            }
            #expect(outcome.failures.isEmpty, "\(outcome.failures.prefix(3))")
            let failed = outcome.replies.filter { $0["result"]?["status"]?.intValue != 200 }
            #expect(failed.isEmpty, "calls through \(host.socketPath) failed: \(failed.prefix(3))")
        }
    }
}
