import ATTestbed
import AccountStoreCore
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

/// `blueskyd store copy` as a user runs it: a registry moves from one machine's SQLite store to
/// a PostgreSQL tenant and back, and every account goes on working without a login.
@Suite("Moving the registry: blueskyd store copy, export and import")
struct StoreCopyTests {
    @Test("""
        live accounts (atproto OAuth with DPoP, an app password) copied from SQLite to a PostgreSQL tenant answer calls \
        and rotate on a host there without a login, and copied back to a new state directory do the same; a dry run \
        writes nothing, a second copy into the tenant is refused (73), and so is a copy from a tenant a host is running (75)
        """, .timeLimit(.minutes(5)))
    func roundTrip() async throws {
        try await StoreMoveFixture.with("blueskyd-copy", postgres: true) { fixture in
            let (directory, testbed) = (fixture.directory, fixture.testbed)
            let database = try #require(fixture.database)
            // One machine's own store: an OAuth account (seeded as a login would have left it)
            // and an app-password account added through the daemon.
            let keyHex = SharedStoreHosts.randomKeyHex()
            let first = directory.path + "/first"
            try SharedStoreHosts.provisionKey(keyHex, stateDirectory: first + "/state")
            let oauth = try await fixture.seedOAuthAccount("oauth0", into: first + "/state")
            let empty = fixture.emptyConfig
            let local = try await fixture.start(first)
            let dids = [oauth, try await fixture.addAppPasswordAccount("app0", to: local)]
            for did in dids { try await Self.expectWorks(local, did) }
            await local.stop()

            // The tenant's database, as README's "Several hosts" sets it up.
            // The owner makes the schema; the tenant's role may not.
            let (ownerURL, ownerPassword) = try SharedStoreHosts.createDatabase(on: database)
            await (try await SeededSharedStore(url: ownerURL, password: ownerPassword, tenant: SharedStoreHosts.ownerTenant,
                                               keyDirectory: directory.file("owner"))).close()
            let password = try SharedStoreHosts.createTenantRole("alice", in: "blueskyd", on: database)
            let url = database.url(user: "alice", database: "blueskyd") + "?sslmode=disable"
            let config = try SharedStoreHosts.writeConfiguration(in: directory.path, url: url, password: password, tenant: "alice",
                                                                 extraLines: ["lease_seconds = 10", "upstream_timeout_seconds = 5"])
            let passwordFile = directory.path + "/store-password"
            let toTenant = ["--to", url, "--to-tenant", "alice", "--to-password-file", passwordFile]
            let fromFirst = ["store", "copy", "--config", empty, "--state-directory", first + "/state"]

            let dry = try await CommandResult.run(Binaries.path("blueskyd"), fromFirst + toTenant + ["--dry-run", "--json"])
            #expect(dry.status == 0, "\(dry.stderr)")
            #expect(dry.json?["dryRun"] == true && dry.json?["accounts"]?.intValue == 2, "\(dry.stdout)")
            #expect(try database.psql("SELECT count(*) FROM account", database: "blueskyd") == "0", "a dry run writes nothing")

            let copied = try await CommandResult.run(Binaries.path("blueskyd"), fromFirst + toTenant + ["--json"])
            #expect(copied.status == 0, "\(copied.stderr)")
            #expect(copied.json?["copied"]?.intValue == 2 && copied.json?["resealed"] == false, "\(copied.stdout)")
            let again = try await CommandResult.run(Binaries.path("blueskyd"), fromFirst + toTenant)
            #expect(again.status == 73 && again.stderr.contains("already holds 2 accounts"), "\(again.stderr)")

            // A host on the tenant: both accounts work at once, and rotate (no token replayed).
            let host = fixture.keep(try await SharedStoreHosts.startHost(0, in: directory.path, keyHex: keyHex, config: config, testbed: testbed))
            for did in dids { try await Self.expectWorks(host, did) }
            // On the host, as its user runs it: its configuration and state directory (its key).
            let fromTenant = ["store", "copy", "--config", config, "--state-directory", directory.path + "/host0/state"]
            let busy = try await CommandResult.run(Binaries.path("blueskyd"), fromTenant + ["--to", directory.path + "/busy/state"])
            #expect(busy.status == 75 && busy.stderr.contains("hosts of the tenant are running"), "\(busy.stderr)")
            #expect(!FileManager.default.fileExists(atPath: directory.path + "/busy/state/accounts.sqlite"))
            await host.stop()

            // And back to a new machine's state directory (no key there yet: the source's goes with it).
            let back = try await CommandResult.run(Binaries.path("blueskyd"), fromTenant + ["--to", directory.path + "/second/state"])
            #expect(back.status == 0, "\(back.stderr)")
            #expect(back.stdout.contains("Copied 2 accounts"), "\(back.stdout)")
            let second = try await fixture.start(directory.path + "/second")
            for did in dids { try await Self.expectWorks(second, did) }
            #expect(try await second.call("accounts.list")["accounts"]?.arrayValue?.contains { $0["isDefault"] == true } == true,
                    "the default went with it")
        }
    }

    @Test("""
        a copy SIGKILLed at random moments leaves the target empty or whole, never in part: into a PostgreSQL tenant \
        (one transaction) and into a state directory (built aside, renamed in); the next copy completes
        """, .timeLimit(.minutes(6)))
    func killedCopy() async throws {
        let directory = try TemporaryDirectory("blueskyd-copy-kill")
        let database = try await offThePool { try PostgresServer.start() }
        try await withTearDown {
            database.destroy()
            directory.remove()
        } run: {
            let count = 1_000
            let source = directory.path + "/source/state"
            try SharedStoreHosts.provisionKey(SharedStoreHosts.randomKeyHex(), stateDirectory: source)
            try await SeededLocalStore.write(stateDirectory: source, count: count) { index in
                (AccountRecord(did: "did:plc:copy\(index)", handle: "copy\(index).test", handleVerified: true,
                               pds: "https://pds.example.test", authKind: .appPassword),
                 AccountSecrets(accessToken: "access-\(index)", refreshToken: "refresh-\(index)"))
            }
            let (ownerURL, ownerPassword) = try SharedStoreHosts.createDatabase(on: database)
            await (try await SeededSharedStore(url: ownerURL, password: ownerPassword, tenant: SharedStoreHosts.ownerTenant,
                                               keyDirectory: directory.file("owner"))).close()
            let password = try SharedStoreHosts.createTenantRole("bob", in: "blueskyd", on: database)
            let url = database.url(user: "bob", database: "blueskyd") + "?sslmode=disable"
            let config = try SharedStoreHosts.writeConfiguration(in: directory.path, url: url, password: password, tenant: "bob")
            let empty = directory.path + "/empty.toml"
            try "".write(toFile: empty, atomically: true, encoding: .utf8)
            let intoTenant = ["store", "copy", "--config", empty, "--state-directory", source,
                              "--to", url, "--to-tenant", "bob", "--to-password-file", directory.path + "/store-password"]
            let tenantRows = { try database.psql("SELECT count(*) FROM account WHERE tenant = 'bob'", database: "blueskyd") }
            try await Self.killAtRandom(intoTenant, rounds: 4) {
                let rows = try tenantRows()
                #expect(rows == "0" || rows == "\(count)", "the tenant holds \(rows) rows")
                return rows == "\(count)"
            } reset: {
                _ = try database.psql("DELETE FROM account WHERE tenant = 'bob'", database: "blueskyd")
            }
            #expect(try tenantRows() == "\(count)")

            // Back into a new state directory, from the tenant.
            let target = directory.path + "/target/state"
            let fromTenant = ["store", "copy", "--config", config, "--state-directory", source, "--to", target]
            try await Self.killAtRandom(fromTenant, rounds: 4) {
                guard FileManager.default.fileExists(atPath: target + "/accounts.sqlite") else { return false }
                let survey = try await CommandResult.run(Binaries.path("blueskyd"), [
                    "store", "copy", "--config", empty, "--state-directory", target, "--to", directory.path + "/probe", "--dry-run", "--json"])
                #expect(survey.json?["accounts"]?.intValue == count, "a copy in place is whole: \(survey.stdout) \(survey.stderr)")
                return true
            } reset: {
                // The store, with its log and shared memory, as a user removes one.
                for suffix in ["", "-wal", "-shm"] { unlink(target + "/accounts.sqlite" + suffix) }
            }
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: target).filter { $0.hasPrefix(".copy-") }
            #expect(leftovers.isEmpty, "the last copy cleared what the killed ones left: \(leftovers)")
        }
    }

    @Test("""
        export, delete the state directory, import with the key into a new one: the accounts answer and rotate without a \
        login; a damaged export, one sealed with another key and a file that is not one are refused with nothing written
        """, .timeLimit(.minutes(4)))
    func exportDeleteImport() async throws {
        try await StoreMoveFixture.with("blueskyd-export") { fixture in
            let (directory, testbed) = (fixture.directory, fixture.testbed)
            let machine = directory.path + "/machine"
            let oauth = try await fixture.seedOAuthAccount("oauth1", into: machine + "/state")
            let empty = fixture.emptyConfig
            let store = ["--config", empty, "--state-directory", machine + "/state"]
            var daemon = try await fixture.start(machine)
            let dids = [oauth, try await fixture.addAppPasswordAccount("app1", to: daemon)]
            for did in dids { try await Self.expectWorks(daemon, did) }
            let running = try await CommandResult.run(Binaries.path("blueskyd"), ["store", "export"] + store + ["--to", directory.path + "/x"])
            #expect(running.status == 75, "the daemon holds the store: \(running.stderr)")
            await daemon.stop()

            let file = directory.path + "/registry.export"
            let exported = try await CommandResult.run(Binaries.path("blueskyd"), ["store", "export"] + store + ["--to", file, "--json"])
            #expect(exported.status == 0 && exported.json?["accounts"]?.intValue == 2, "\(exported.stdout) \(exported.stderr)")
            // The key kept apart, then the machine's state directory lost.
            let key = directory.path + "/kept.key"
            try FileManager.default.copyItem(atPath: machine + "/state/store.key", toPath: key)
            try FileManager.default.removeItem(atPath: machine)

            // Refusals first: nothing appears in the new state directory.
            let fresh = directory.path + "/fresh"
            let into = ["store", "import", "--config", empty, "--state-directory", fresh + "/state"]
            var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
            bytes[bytes.count / 2] ^= 0x40
            try bytes.write(to: URL(fileURLWithPath: directory.path + "/damaged.export"))
            let damaged = try await CommandResult.run(Binaries.path("blueskyd"), into + ["--from", directory.path + "/damaged.export", "--key-file", key])
            #expect(damaged.status == 65 && damaged.stderr.contains("damaged"), "\(damaged.stderr)")
            let otherKey = directory.path + "/other.key"
            FileManager.default.createFile(atPath: otherKey, contents: Data(SharedStoreHosts.randomKeyHex().utf8),
                                           attributes: [.posixPermissions: 0o600])
            let wrong = try await CommandResult.run(Binaries.path("blueskyd"), into + ["--from", file, "--key-file", otherKey])
            #expect(wrong.status == 78 && wrong.stderr.contains("another store key"), "\(wrong.stderr)")
            let notOne = try await CommandResult.run(Binaries.path("blueskyd"), into + ["--from", empty, "--key-file", key])
            #expect(notOne.status == 65 && notOne.stderr.contains("not a blueskyd export"), "\(notOne.stderr)")
            #expect(!FileManager.default.fileExists(atPath: fresh + "/state/accounts.sqlite"), "nothing written")

            let dry = try await CommandResult.run(Binaries.path("blueskyd"), into + ["--from", file, "--key-file", key, "--dry-run", "--json"])
            #expect(dry.status == 0 && dry.json?["accounts"]?.intValue == 2 && dry.json?["dryRun"] == true, "\(dry.stdout) \(dry.stderr)")
            #expect(!FileManager.default.fileExists(atPath: fresh + "/state/accounts.sqlite"), "a dry run writes no store")
            let imported = try await CommandResult.run(Binaries.path("blueskyd"), into + ["--from", file, "--key-file", key, "--json"])
            #expect(imported.status == 0 && imported.json?["accounts"]?.intValue == 2, "\(imported.stdout) \(imported.stderr)")
            let twice = try await CommandResult.run(Binaries.path("blueskyd"), into + ["--from", file, "--dry-run"])
            #expect(twice.status == 73 && twice.stderr.contains("already holds 2 accounts"), "\(twice.stderr)")
            daemon = try await fixture.start(fresh)
            for did in dids { try await Self.expectWorks(daemon, did) }
        }
    }

    /// Runs the copy `arguments` once to the end (timing it), then `rounds` times SIGKILLed at
    /// a random moment within that time, then once more to the end. After each, `check` looks
    /// at the target: it must be empty or whole (`check` says whether whole), and `reset`
    /// empties a whole one for the next round.
    static func killAtRandom(_ arguments: [String], rounds: Int, check: () async throws -> Bool,
                             reset: () async throws -> Void) async throws {
        let started = ContinuousClock.now
        let timed = try await CommandResult.run(Binaries.path("blueskyd"), arguments)
        let duration = ContinuousClock.now - started
        #expect(timed.status == 0, "\(timed.stderr)")
        #expect(try await check(), "a copy run to its end is whole")
        try await reset()
        var killedMidway = 0
        // Rounds past `rounds` only while no kill has landed mid-copy yet (a loaded machine makes
        // the timed run slow and the later ones quick): the promise needs at least one.
        var round = 0
        while round < rounds || (killedMidway == 0 && round < 3 * rounds) {
            round += 1
            let process = Process()
            process.executableURL = URL(fileURLWithPath: Binaries.path("blueskyd"))
            process.arguments = arguments
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            try await Task.sleep(for: duration * Double.random(in: 0.1...0.95))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            if try await check() { try await reset() } else { killedMidway += 1 }
        }
        #expect(killedMidway > 0, "at least one kill landed before the copy was in place")
        let last = try await CommandResult.run(Binaries.path("blueskyd"), arguments)
        #expect(last.status == 0, "\(last.stderr)")
        #expect(try await check())
    }

    /// A call as the account answers, then a forced refresh that the server accepts (a token
    /// copied stale, or replayed, would be refused).
    static func expectWorks(_ daemon: DaemonProcess, _ did: String) async throws {
        let reply = try await daemon.call("xrpc.call", ["nsid": "app.bsky.actor.getProfile", "account": .string(did),
                                                        "params": ["actor": .string(did)]])
        #expect(reply["status"] == 200, "\(did): \(reply)")
        let refreshed = try await daemon.call("accounts.refresh", ["account": .string(did), "force": true])
        #expect(refreshed["account"]?["state"] == "active", "\(did): \(refreshed)")
    }
}
