import ATTestbed
import BlueskyTesting
import DaemonHarness
import Foundation
import JSONRPC
import Testing

/// The storm at full size: 10,000 OAuth accounts on one PostgreSQL database, all due
/// at once, and three real blueskyd hosts taking them from the shared schedule.
@Suite("An expiry storm across 10,000 accounts on three hosts")
struct SharedStoreStormTests {
    static let accountCount = 10_000

    @Test("""
        10,000 accounts falling due at once are each refreshed exactly once by one of three hosts: \
        no refresh token presented twice, no grant refused, every host takes a share; a taken \
        account's refresh reads nothing more from the database before its claim
        """)
    func tenThousandAccounts() async throws {
        try HermeticNetwork.require()
        let directory = try TemporaryDirectory("blueskyd-storm")
        // Counting statements: what each refresh costs the database is part of what is checked.
        let database = try await offThePool {
            try PostgresServer.start(settings: [("shared_preload_libraries", "pg_stat_statements"),
                                                ("pg_stat_statements.track", "top"),
                                                ("pg_stat_statements.track_planning", "on")])
        }
        // New tokens live an hour: one rotation per account in this test.
        let testbed = try await Testbed.startInHermeticNetwork(directory: directory.file("testbed")) { config in
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
            _ = try database.psql("CREATE EXTENSION pg_stat_statements", database: "blueskyd")
            let store = try await SeededSharedStore(url: url, password: password, tenant: SharedStoreHosts.ownerTenant,
                                              keyDirectory: directory.file("seeding"))
            seeding = store

            // Tokens within blueskyd's refresh lead, but nothing due in the shared schedule yet.
            let minted = try SeededOAuthAccounts.mint(at: testbed, names: (0..<Self.accountCount).map { "storm\($0)" },
                                                       accessExpiresAt: Date().addingTimeInterval(90))
            let ids = try await store.write(count: minted.count, account: { index in
                SeededOAuthAccounts.account(minted[index].session, key: minted[index].key, isDefault: false,
                                            issuer: testbed.oauthIssuer, pdsURL: testbed.pdsURL,
                                            issuedAt: minted[index].session.accessExpiresAt.addingTimeInterval(-3600))
            }, due: { _ in .distantFuture })

            let config = try SharedStoreHosts.writeConfiguration(in: directory.path, url: url, password: password, tenant: SharedStoreHosts.ownerTenant)
            for index in 0..<3 {
                hosts.append(try await SharedStoreHosts.startHost(index, in: directory.path, keyHex: store.keyHex,
                                                                  config: config, testbed: testbed, logLevel: "notice"))
            }
            for host in hosts {
                let loaded = try await host.call("daemon.status")["accounts"]?.intValue
                try #require(loaded == Self.accountCount, "every host loads every account: \(loaded ?? -1)")
            }
            #expect(testbed.oauthTotals.refreshes == 0, "nothing is refreshed before it falls due")

            _ = try database.psql("SELECT pg_stat_statements_reset()", database: "blueskyd")
            let stormStart = ContinuousClock.now
            try await store.makeDue(ids)
            try await waitUntil("every account refreshed", timeout: .seconds(600)) {
                testbed.oauthTotals.refreshes >= Self.accountCount
            }
            let stormTime = ContinuousClock.now - stormStart
            // The testbed counts a grant before the host has saved its tokens: wait for the saves.
            var rotated: [Int] = []
            try await waitUntil("every host saved the tokens it rotated", timeout: .seconds(60)) {
                rotated = try await SharedStoreHosts.tokensRotated(hosts)
                return rotated.reduce(0, +) >= Self.accountCount
            }
            print("storm of \(Self.accountCount) accounts on three hosts: \(stormTime), tokens rotated per host \(rotated)")
            // The take hands each account's secrets over with its row: a refresh then reads
            // neither again (each such read was one more round trip per refresh).
            let reads = try Self.statementCalls(database, matching: "% sealed_secrets FROM account WHERE tenant = $1 AND id = $2")
            let statements = try Self.statementCalls(database, matching: "%")
            print("statements during the storm: \(statements), \(Double(statements) / Double(Self.accountCount)) per refresh; secrets read one account at a time: \(reads)")
            #expect(reads == 0, "no refresh read its account's secrets again after the take: \(reads) did")
            // The claim and the save are prepared once per connection: planned a few times per
            // connection (five custom plans, then one generic), not once per refresh.
            for (what, pattern) in [("claim", "UPDATE account a SET refresh_started_at = $1%"),
                                    ("save", "WITH changed AS (UPDATE account SET sealed_secrets = $1%")] {
                let (calls, plans) = try Self.callsAndPlans(database, matching: pattern)
                print("\(what): \(calls) calls, \(plans) plans")
                #expect(calls >= Self.accountCount && plans * 10 < calls, "the \(what) is planned \(plans) times for \(calls) calls")
            }

            let totals = testbed.oauthTotals
            #expect(totals.refreshes == Self.accountCount, "one refresh per account: \(totals.refreshes)")
            #expect(totals.refreshTokenReplays == 0 && totals.invalidGrants == 0,
                    "no refresh token presented twice, no grant refused: \(totals)")
            let notOnce = minted.filter { testbed.oauthStats(did: $0.session.did).refreshes != 1 }
            #expect(notOnce.isEmpty, "\(notOnce.count) accounts were not refreshed exactly once")
            #expect(rotated.reduce(0, +) == Self.accountCount && rotated.allSatisfy { $0 * 10 >= Self.accountCount },
                    "the hosts saved one rotation per account, each host at least a tenth: \(rotated)")
            for host in hosts {
                let status = try await host.call("daemon.status")
                #expect(status["active"]?.intValue == Self.accountCount && status["needsLogin"]?.intValue == 0,
                        "every account is signed in on every host: \(status)")
            }
            // The dates go to the database in batches, after the saves: the last batch may trail them.
            var spent = ""
            let written = try await eventually(timeout: .seconds(30)) {
                spent = try database.psql(
                    "SELECT count(*) FROM account WHERE refresh_due_at IS NULL OR refresh_due_at < extract(epoch FROM now()) - 978307200 + 600",
                    database: "blueskyd")
                return spent == "0"
            }
            #expect(written, "every account's next refresh is written back, about an hour ahead: \(spent) are not")
        }
    }

    /// Calls of the statements whose text (its whitespace made single spaces) matches `pattern`,
    /// and how many times they were planned, since the last reset.
    static func callsAndPlans(_ database: PostgresServer, matching pattern: String) throws -> (calls: Int, plans: Int) {
        let answer = try database.psql("""
            SELECT coalesce(sum(calls), 0) || ' ' || coalesce(sum(plans), 0) FROM pg_stat_statements
            WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'blueskyd')
                AND regexp_replace(query, '\\s+', ' ', 'g') LIKE '\(pattern)'
            """, database: "blueskyd").split(separator: " ").compactMap { Int($0) }
        return answer.count == 2 ? (answer[0], answer[1]) : (-1, -1)
    }

    /// Calls of the statements whose text matches `pattern` (SQL `LIKE`) since the last reset.
    static func statementCalls(_ database: PostgresServer, matching pattern: String) throws -> Int {
        let answer = try database.psql("""
            SELECT coalesce(sum(calls), 0) FROM pg_stat_statements
            WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'blueskyd') AND query LIKE '\(pattern)'
            """, database: "blueskyd")
        return Int(answer) ?? -1
    }
}
