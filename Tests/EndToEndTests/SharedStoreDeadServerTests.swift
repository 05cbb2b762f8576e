import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

/// A server that stops answering holds only its own share of each host's refresh slots, and
/// what a host takes from the shared schedule: the other servers' accounts keep being refreshed.
@Suite("Several hosts: one authorization server black-holed beside a healthy one")
struct SharedStoreDeadServerTests {
    static let each = 1_000

    @Test("""
        3 hosts, 1,000 due OAuth accounts at a black-holed token endpoint (the most overdue) beside 1,000 at a \
        healthy one whose tokens expire in 120 s: every healthy account is refreshed before its expiry
        """, .timeLimit(.minutes(6)))
    func deadServerStarvesNobody() async throws {
        try HermeticNetwork.require()
        let directory = try TemporaryDirectory("blueskyd-deadserver")
        let database = try await offThePool { try PostgresServer.start() }
        let testbed = try await Testbed.startInHermeticNetwork(directory: directory.file("testbed")) { config in
            config.oauthAccessTokenLifetime = .seconds(3600)
        }
        // auth.tb64.test resolves to 127.0.0.64 in the hermetic network, a slot no testbed takes
        // (RewrittenRowTests holds 63): nothing answers there but this black hole.
        let blackHole = try await BlackHole.start(host: "127.0.0.64", port: 443)
        let deadIssuer = "https://auth.tb64.test"
        var hosts: [DaemonProcess] = []
        var seeding: SeededSharedStore?
        try await withTearDown {
            for host in hosts { await host.stop() }
            await seeding?.close()
            await blackHole.stop()
            try? await testbed.shutdown()
            database.destroy()
            directory.remove()
        } run: {
            let (url, password) = try SharedStoreHosts.createDatabase(on: database)
            let store = try await SeededSharedStore(url: url, password: password, tenant: SharedStoreHosts.ownerTenant,
                                                    keyDirectory: directory.file("seeding"))
            seeding = store
            let expiry = Date().addingTimeInterval(120)
            let healthy = try SeededOAuthAccounts.mint(at: testbed, names: (0..<Self.each).map { "alive\($0)" }, accessExpiresAt: expiry)
            let stranded = try SeededOAuthAccounts.mint(at: testbed, names: (0..<Self.each).map { "dead\($0)" }, accessExpiresAt: expiry)
            let healthyIDs = try await store.write(count: healthy.count, account: { index in
                SeededOAuthAccounts.account(healthy[index].session, key: healthy[index].key, isDefault: false,
                                            issuer: testbed.oauthIssuer, pdsURL: testbed.pdsURL, issuedAt: expiry.addingTimeInterval(-3600))
            }, due: { _ in .distantFuture })
            let strandedIDs = try await store.write(count: stranded.count, account: { index in
                var account = SeededOAuthAccounts.account(stranded[index].session, key: stranded[index].key, isDefault: false,
                                                          issuer: deadIssuer, pdsURL: testbed.pdsURL,
                                                          issuedAt: expiry.addingTimeInterval(-3600))
                account.record.oauth?.tokenEndpoint = deadIssuer + "/oauth/token"
                return account
            }, due: { _ in .distantFuture })

            let config = try SharedStoreHosts.writeConfiguration(
                in: directory.path, url: url, password: password, tenant: SharedStoreHosts.ownerTenant,
                extraLines: ["lease_seconds = 10", "upstream_timeout_seconds = 5"])
            for index in 0..<3 {
                hosts.append(try await SharedStoreHosts.startHost(index, in: directory.path, keyHex: store.keyHex, config: config,
                                                                  testbed: testbed, logLevel: "notice", readyTimeout: .seconds(90)))
            }
            // The dead server's accounts fall due first: every host meets them before the rest.
            try await store.makeDue(strandedIDs, at: Date().addingTimeInterval(-60))
            try await store.makeDue(healthyIDs, at: Date())
            let dids = healthy.map(\.session.did)
            try await waitUntil("every healthy account refreshed", timeout: .seconds(115)) {
                dids.allSatisfy { testbed.oauthStats(did: $0).refreshes >= 1 }
            }
            #expect(Date() < expiry, "all before the tokens expired")
            #expect(dids.allSatisfy { testbed.oauthStats(did: $0).refreshesAfterAccessExpiry == 0 })
            #expect(testbed.oauthTotals.refreshTokenReplays == 0)
            #expect(blackHole.connections > 0, "the dead server's accounts were tried too")
        }
    }
}
