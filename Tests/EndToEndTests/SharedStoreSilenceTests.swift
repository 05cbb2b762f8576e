import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

/// A database that goes silent (its packets dropped: no reset, no refusal) must cost the daemon
/// nothing it can do without the database: it answers, feeds systemd's watchdog, makes calls
/// with the tokens it holds, and recovers by itself.
@Suite("A shared store whose packets are dropped for 60 s")
struct SharedStoreSilenceTests {
    @Test("""
        60 s of dropped packets between blueskyd and PostgreSQL: daemon.status answers within 1 s throughout, the \
        watchdog is fed, calls with held tokens work, then the store is written again and every account refreshes
        """, .timeLimit(.minutes(5)))
    func droppedPackets() async throws {
        try HermeticNetwork.require()
        let directory = try TemporaryDirectory("blueskyd-silence")
        let database = try await offThePool { try PostgresServer.start() }
        let testbed = try await Testbed.startInHermeticNetwork(directory: directory.file("testbed")) { config in
            config.accessTokenLifetime = .seconds(3600)
        }
        let relay = try await TCPRelay.start(to: "127.0.0.1", port: Int(database.port))
        var daemon: LaunchedDaemon?
        try await withTearDown {
            _ = await daemon?.stop()
            await relay.stop()
            try? await testbed.shutdown()
            database.destroy()
            directory.remove()
        } run: {
            let (url, password) = try SharedStoreHosts.createDatabase(on: database)
            let relayed = url.replacingOccurrences(of: ":\(database.port)/", with: ":\(relay.port)/")
            let config = try SharedStoreHosts.writeConfiguration(in: directory.path, url: relayed, password: password,
                                                                 tenant: SharedStoreHosts.ownerTenant, extraLines: ["upstream_timeout_seconds = 5"])
            try SharedStoreHosts.provisionKey(SharedStoreHosts.randomKeyHex(), stateDirectory: directory.file("state"))
            let notify = try NotifySocket(path: directory.file("notify"))
            let socket = directory.file("run/blueskyd.sock")
            let launched = try LaunchedDaemon(
                directory: directory, socketPath: socket,
                arguments: ["--config", config, "--state-directory", directory.file("state"), "--socket", socket,
                            "--ca-file", testbed.caFile, "--plc-url", testbed.plcURL, "--log-level", "debug"],
                environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "10000000"])
            daemon = launched
            _ = try await notify.waitFor("READY=1") { $0.hasPrefix("READY=1") }

            var accounts: [TestAccount] = []
            for name in ["quiet0", "quiet1"] {
                var spec = AccountSpec(name: name)
                spec.publishWellKnown = true
                let account = await testbed.createAccount(spec)
                try await launched.call("accounts.add", ["identifier": .string(account.did), "password": .string(account.appPassword)])
                accounts.append(account)
            }
            // Calls made before hold their tokens in memory.
            for account in accounts { try await Self.expectCall(launched, account) }

            relay.drop()
            let silenced = ContinuousClock.now
            var pings = notify.messages.count(where: { $0 == "WATCHDOG=1" })
            var lastPing = ContinuousClock.now
            var longestWithoutPing: Duration = .zero
            var slowest: Duration = .zero
            var sawOutage = false
            while ContinuousClock.now - silenced < .seconds(60) {
                let asked = ContinuousClock.now
                let status = try await launched.call("daemon.status")
                slowest = max(slowest, ContinuousClock.now - asked)
                if status["storeUnavailable"] != .null { sawOutage = true }
                for account in accounts { try await Self.expectCall(launched, account) }
                let pinged = notify.messages.count(where: { $0 == "WATCHDOG=1" })
                if pinged > pings { (pings, lastPing) = (pinged, ContinuousClock.now) }
                longestWithoutPing = max(longestWithoutPing, ContinuousClock.now - lastPing)
                // A refresh asked for meanwhile cannot be recorded: it fails at once, told why.
                if ContinuousClock.now - silenced > .seconds(20), ContinuousClock.now - silenced < .seconds(22) {
                    await #expect(throws: (any Error).self) {
                        try await launched.call("accounts.refresh", ["account": .string(accounts[0].did), "force": true])
                    }
                }
                try await Task.sleep(for: .milliseconds(500))
            }
            #expect(slowest < .seconds(1), "daemon.status answered within 1 s throughout; the slowest took \(slowest)")
            #expect(sawOutage, "the status said the store was unavailable")
            #expect(longestWithoutPing < .seconds(8), "the watchdog (10 s) was fed throughout: the longest gap was \(longestWithoutPing)")
            #expect(!launched.log.contains("liveness check failed"), "no part stopped answering")
            let testbedRefreshes = accounts.map { testbed.stats(did: $0.did).refreshes }

            relay.resume()
            try await waitUntil("the store is written again", timeout: .seconds(90)) {
                try await launched.call("daemon.status")["storeUnavailable"] == .null
            }
            for account in accounts {
                let refreshed = try await launched.call("accounts.refresh", ["account": .string(account.did), "force": true])
                #expect(refreshed["account"]?["state"] == "active")
                try await Self.expectCall(launched, account)
            }
            #expect(zip(accounts, testbedRefreshes).allSatisfy { testbed.stats(did: $0.did).refreshes > $1 })
            for account in accounts { #expect(testbed.stats(did: account.did).refreshTokenReuses == 0) }
            #expect(launched.runner.isRunning, "the daemon ran through it all")
        }
    }

    private static func expectCall(_ daemon: LaunchedDaemon, _ account: TestAccount) async throws {
        let reply = try await daemon.call("xrpc.call", ["nsid": "app.bsky.actor.getProfile", "account": .string(account.did),
                                                        "params": ["actor": .string(account.did)]])
        #expect(reply["status"] == 200, "a call for \(account.handle): \(reply)")
    }
}
