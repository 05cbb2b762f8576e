import ATTestbed
import BlueskyTesting
import DaemonHarness
import Foundation
import JSONRPC
import Testing

/// `store copy` between two tenants of one PostgreSQL database, where account ids are unique
/// across tenants: the copies get new ids, said in the report, and work on the other tenant.
@Suite("Copying between two tenants of one database")
struct StoreTenantCopyTests {
    @Test("""
        a tenant copied into another tenant of the same database: every account gets a new id (the report lists old → \
        new), works on a host of the new tenant (calls, a refresh that rotates), and the first tenant keeps its rows
        """, .timeLimit(.minutes(5)))
    func copyBetweenTenants() async throws {
        try await StoreMoveFixture.with("blueskyd-tenant-copy", postgres: true) { fixture in
            let (directory, testbed) = (fixture.directory, fixture.testbed)
            let database = try #require(fixture.database)
            let keyHex = SharedStoreHosts.randomKeyHex()
            let first = directory.path + "/first"
            try SharedStoreHosts.provisionKey(keyHex, stateDirectory: first + "/state")
            let oauth = try await fixture.seedOAuthAccount("oauth7", into: first + "/state")
            let local = try await fixture.start(first)
            let dids = [oauth, try await fixture.addAppPasswordAccount("app71", to: local)]
            await local.stop()

            let (ownerURL, ownerPassword) = try SharedStoreHosts.createDatabase(on: database)
            await (try await SeededSharedStore(url: ownerURL, password: ownerPassword, tenant: SharedStoreHosts.ownerTenant,
                                               keyDirectory: directory.file("owner"))).close()
            var configs: [String: String] = [:]
            var urls: [String: String] = [:]
            for tenant in ["dave", "erin"] {
                let home = directory.path + "/" + tenant
                try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
                let password = try SharedStoreHosts.createTenantRole(tenant, in: "blueskyd", on: database)
                urls[tenant] = database.url(user: tenant, database: "blueskyd") + "?sslmode=disable"
                configs[tenant] = try SharedStoreHosts.writeConfiguration(in: home, url: urls[tenant]!, password: password,
                                                                          tenant: tenant, extraLines: ["lease_seconds = 10", "upstream_timeout_seconds = 5"])
            }
            let intoDave = try await fixture.blueskyd(["store", "copy", "--config", fixture.emptyConfig, "--state-directory",
                                                       first + "/state", "--to", urls["dave"]!, "--to-tenant", "dave",
                                                       "--to-password-file", directory.path + "/dave/store-password"])
            #expect(intoDave.status == 0, "\(intoDave.stderr)")
            let ids = try database.psql("SELECT string_agg(id::text, ',' ORDER BY id) FROM account WHERE tenant = 'dave'",
                                        database: "blueskyd")

            try SharedStoreHosts.provisionKey(keyHex, stateDirectory: directory.path + "/dave/host/state")
            let copyIntoErin = ["store", "copy", "--config", configs["dave"]!, "--state-directory", directory.path + "/dave/host/state",
                                "--to", urls["erin"]!, "--to-tenant", "erin", "--to-password-file", directory.path + "/erin/store-password"]
            // A tenant in use is no target, even empty: its host, with a key of its own, could open none of the rows.
            let running = try await SharedStoreHosts.startHost(1, in: directory.path + "/erin", keyHex: SharedStoreHosts.randomKeyHex(),
                                                               config: configs["erin"]!, testbed: testbed)
            let busy = try await fixture.blueskyd(copyIntoErin)
            #expect(busy.status == 75 && busy.stderr.contains("nothing was written"), "\(busy.stderr)")
            #expect(try database.psql("SELECT count(*) FROM account WHERE tenant = 'erin'", database: "blueskyd") == "0")
            await running.stop()
            try FileManager.default.removeItem(atPath: directory.path + "/erin/host1")
            let intoErin = try await fixture.blueskyd(["store", "copy", "--config", configs["dave"]!, "--state-directory",
                                                       directory.path + "/dave/host/state", "--to", urls["erin"]!,
                                                       "--to-tenant", "erin", "--to-password-file",
                                                       directory.path + "/erin/store-password", "--json"])
            #expect(intoErin.status == 0, "\(intoErin.stderr)")
            let renumbered = intoErin.json?["renumbered"]?.arrayValue ?? []
            #expect(renumbered.count == 2, "\(intoErin.stdout)")
            let newIDs = Set(renumbered.compactMap { $0["to"]?.stringValue })
            #expect(intoErin.json?["default"]?.stringValue.map(newIDs.contains) == true, "the default, by its id in erin: \(intoErin.stdout)")
            let erinIDs = try database.psql("SELECT string_agg(id::text, ',' ORDER BY id) FROM account WHERE tenant = 'erin'",
                                            database: "blueskyd")
            #expect(Set(erinIDs.split(separator: ",").map(String.init)) == newIDs, "the report names the ids erin holds")
            #expect(try database.psql("SELECT string_agg(id::text, ',' ORDER BY id) FROM account WHERE tenant = 'dave'",
                                      database: "blueskyd") == ids, "dave's rows are as they were")

            let host = fixture.keep(try await SharedStoreHosts.startHost(0, in: directory.path + "/erin", keyHex: keyHex,
                                                                         config: configs["erin"]!, testbed: testbed))
            for did in dids { try await StoreCopyTests.expectWorks(host, did) }
            let listed = try await host.call("accounts.list")["accounts"]?.arrayValue ?? []
            #expect(Set(listed.compactMap { $0["id"]?.stringValue }) == newIDs, "\(listed)")
        }
    }
}
