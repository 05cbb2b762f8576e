import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

/// The cluster never presents a spent token while its holder lives: a host that could not save
/// the tokens a server rotated keeps the account, however long the database is away.
@Suite("Several hosts: the database gone between a rotation and its save")
struct SharedStoreOutageTests {
    @Test("""
        two hosts, lease 10 s: the database stops after the servers rotated four accounts' tokens (two OAuth, two \
        app-password) and before host 0 saved them, for 15 s; then every account is due on both: no token is \
        presented twice, host 0 saves what it holds, every account works on both hosts
        """, .timeLimit(.minutes(5)))
    func outageBetweenRotationAndSave() async throws {
        try HermeticNetwork.require()
        let directory = try TemporaryDirectory("blueskyd-outage")
        let database = try await offThePool { try PostgresServer.start() }
        let testbed = try await Testbed.startInHermeticNetwork(directory: directory.file("testbed")) { config in
            config.accessTokenLifetime = .seconds(3600)
            config.oauthAccessTokenLifetime = .seconds(3600)
        }
        var hosts: [DaemonProcess] = []
        var seeding: SeededSharedStore?
        try await withTearDown {
            for host in hosts { await host.stop() }
            await seeding?.close()
            try? await testbed.shutdown()
            database.destroy()
            directory.remove()
        } run: {
            let (url, password) = try SharedStoreHosts.createDatabase(on: database)
            let store = try await SeededSharedStore(url: url, password: password, tenant: SharedStoreHosts.ownerTenant,
                                                    keyDirectory: directory.file("seeding"))
            seeding = store
            let minted = try SeededOAuthAccounts.mint(at: testbed, names: ["oauth0", "oauth1"],
                                                       accessExpiresAt: Date().addingTimeInterval(3600))
            let oauthIDs = try await store.write(count: minted.count, account: { index in
                SeededOAuthAccounts.account(minted[index].session, key: minted[index].key, isDefault: false,
                                            issuer: testbed.oauthIssuer, pdsURL: testbed.pdsURL, issuedAt: Date())
            }, due: { _ in .distantFuture })
            await store.close()
            seeding = nil

            let config = try SharedStoreHosts.writeConfiguration(
                in: directory.path, url: url, password: password, tenant: SharedStoreHosts.ownerTenant,
                extraLines: ["lease_seconds = 10", "upstream_timeout_seconds = 5"])
            for index in 0..<2 {
                hosts.append(try await SharedStoreHosts.startHost(index, in: directory.path, keyHex: store.keyHex, config: config,
                                                                  testbed: testbed, logLevel: "debug"))
            }
            var appPasswordIDs: [String] = []
            for name in ["app0", "app1"] {
                var spec = AccountSpec(name: name)
                spec.publishWellKnown = true
                let account = await testbed.createAccount(spec)
                let added = try await hosts[0].call("accounts.add", ["identifier": .string(account.did),
                                                                    "password": .string(account.appPassword)])
                appPasswordIDs.append(try #require(added["account"]?["id"]?.stringValue))
            }
            let ids = oauthIDs.map { $0.uuidString.lowercased() } + appPasswordIDs
            try await waitUntil("host 1 knows every account", timeout: .seconds(30)) {
                try await hosts[1].call("daemon.status")["accounts"]?.intValue == ids.count
            }

            // Every account refreshed once first: the DPoP nonces are known, as in a running daemon.
            for id in ids { _ = try await hosts[0].call("accounts.refresh", ["account": .string(id), "force": true]) }

            // The servers rotate, then answer 3 s later: the database stops in between.
            let refreshes = { testbed.oauthTotals.refreshes + testbed.accounts.map { testbed.stats(did: $0.did).refreshes }.reduce(0, +) }
            let before = refreshes()
            testbed.shapeAnswers(at: .oauth(.token), .delayed(.seconds(3)), count: 2)
            testbed.shapeAnswers(at: .xrpc("com.atproto.server.refreshSession"), .delayed(.seconds(3)), count: 2)
            let first = hosts[0]
            let forced = Task { [ids] in
                await withTaskGroup(of: Void.self) { group in
                    for id in ids {
                        group.addTask { _ = try? await first.call("accounts.refresh", ["account": .string(id), "force": true]) }
                    }
                }
            }
            let rotatedAll = try await eventually(timeout: .seconds(30)) { refreshes() >= before + 4 }
            try #require(rotatedAll, "the servers rotated all four (\(refreshes() - before)): \(hosts[0].log.suffix(4000))")
            try await offThePool { try database.stop(mode: .fast) }
            await forced.value
            for id in ids {
                let view = try await hosts[0].call("accounts.list")["accounts"]?.arrayValue?.first { $0["id"]?.stringValue == id }
                #expect(view?["state"] == "retrying", "host 0 holds rotated tokens it could not save: \(view ?? .null)")
            }
            try await Task.sleep(for: .seconds(15))
            try await offThePool { try database.start() }

            // Every account falls due on both hosts at once: host 1 takes them, and must not
            // send the refresh tokens host 0 spent.
            let reopened = try await SeededSharedStore(url: url, password: password, tenant: SharedStoreHosts.ownerTenant,
                                                       keyDirectory: directory.file("seeding2"), keyHex: store.keyHex)
            seeding = reopened
            try await reopened.makeDue(ids.compactMap(UUID.init(uuidString:)))
            for host in hosts {
                try await waitUntil("every account is active on host \(host.pid)", timeout: .seconds(90)) {
                    let views = try await host.call("accounts.list")["accounts"]?.arrayValue ?? []
                    return views.count == ids.count && views.allSatisfy { $0["state"] == "active" }
                }
            }
            #expect(testbed.oauthTotals.refreshTokenReplays == 0, "no OAuth refresh token was presented twice")
            for account in testbed.accounts {
                let stats = testbed.stats(did: account.did)
                #expect(stats.refreshTokenReuses == 0 && stats.rejectedRefreshes == 0, "\(account.handle): \(stats)")
            }
            // Calls through both hosts work with what host 0 saved.
            for host in hosts {
                for account in testbed.accounts {
                    let reply = try await host.call("xrpc.call", ["nsid": "app.bsky.actor.getProfile", "account": .string(account.did),
                                                                  "params": ["actor": .string(account.did)]])
                    #expect(reply["status"] == 200, "\(account.handle) through host \(host.pid): \(reply)")
                }
            }
        }
    }
}
