import ATTestbed
import BlueskyTesting
import DaemonHarness
import Foundation
import JSONRPC
import Testing

/// `store import --check`: after a restore, which sessions still work, found before anyone
/// calls through them.
@Suite("Checking the sessions an import restored: store import --check")
struct StoreImportCheckTests {
    @Test("""
        an export restored on a new machine with --check: the OAuth session rotated since the export needs a login (and \
        is marked so), an app-password session is live and its rotated tokens are kept (the daemon then works with it), one \
        whose server answers 503 is unreachable and keeps its session; --check with --dry-run is refused (64)
        """, .timeLimit(.minutes(5)))
    func checkRestoredSessions() async throws {
        try await StoreMoveFixture.with("blueskyd-import-check") { fixture in
            let first = fixture.directory.path + "/first"
            let oauth = try await fixture.seedOAuthAccount("oauth4", into: first + "/state")
            var daemon = try await fixture.start(first)
            let app1 = try await fixture.addAppPasswordAccount("app41", to: daemon)
            let app2 = try await fixture.addAppPasswordAccount("app42", to: daemon)
            await daemon.stop()
            let (file, key) = try await fixture.exportKeepingKey(first)

            // The OAuth session rotates on the first machine: the export's refresh token is spent.
            daemon = try await fixture.start(first)
            try await StoreCopyTests.expectWorks(daemon, oauth)
            await daemon.stop()

            // The command reaches the servers as the daemon does: the testbed's CA and PLC, from its configuration.
            let second = fixture.directory.path + "/second"
            let config = fixture.directory.path + "/check.toml"
            try "ca_file = \"\(fixture.testbed.caFile)\"\nplc_url = \"\(fixture.testbed.plcURL)\"\n"
                .write(toFile: config, atomically: true, encoding: .utf8)
            let secondStore = ["--config", config, "--state-directory", second + "/state"]
            let importing = ["store", "import"] + secondStore + ["--from", file, "--key-file", key]
            let dry = try await fixture.blueskyd(importing + ["--check", "--dry-run"])
            #expect(dry.status == 64 && dry.stderr.contains("--check"), "\(dry.stderr)")

            // One of the two app-password refreshes meets a 503.
            fixture.testbed.injectFailures(nsid: "com.atproto.server.refreshSession", status: 503, count: 1)
            let imported = try await fixture.blueskyd(importing + ["--check", "--json"])
            #expect(imported.status == 0, "\(imported.stderr)")
            #expect(!imported.stderr.contains("cannot be written"), "a check's end is no store outage: \(imported.stderr)")
            let lines = imported.json?["check"]?.arrayValue ?? []
            let outcome = Dictionary(uniqueKeysWithValues: lines.compactMap { line in
                line["did"]?.stringValue.map { ($0, line["outcome"]?.stringValue ?? "") }
            })
            #expect(lines.count == 3, "\(imported.stdout)")
            #expect(outcome[oauth] == "needs-login", "\(imported.stdout)")
            #expect([outcome[app1], outcome[app2]].compactMap { $0 }.sorted() == ["live", "unreachable"], "\(imported.stdout)")
            let unreachable = lines.first { $0["outcome"] == "unreachable" }
            #expect(unreachable?["reason"]?.stringValue?.contains("503") == true, "\(imported.stdout)")

            // The store says what the check found, and what it kept works.
            daemon = try await fixture.start(second)
            let listed = try await daemon.call("accounts.list")["accounts"]?.arrayValue ?? []
            let state = Dictionary(uniqueKeysWithValues: listed.compactMap { account in
                account["did"]?.stringValue.map { ($0, account["state"]?.stringValue ?? "") }
            })
            #expect(state[oauth] == "needs-login", "\(listed)")
            for did in [app1, app2] { try await StoreCopyTests.expectWorks(daemon, did) }
        }
    }

    @Test("""
        an export restored into a PostgreSQL tenant whose host has no store key yet: the host gets the export's key and \
        starts on the tenant (it exited 78 with a key of its own); --check runs there as a host and leaves none alive; a \
        CA file the check cannot use is refused before anything is written (78), and the store stays empty
        """, .timeLimit(.minutes(5)))
    func checkIntoTenant() async throws {
        try await StoreMoveFixture.with("blueskyd-import-check-pg", postgres: true) { fixture in
            let (directory, testbed) = (fixture.directory, fixture.testbed)
            let database = try #require(fixture.database)
            let first = directory.path + "/first"
            try FileManager.default.createDirectory(atPath: first, withIntermediateDirectories: true)
            var daemon = try await fixture.start(first)
            let app = try await fixture.addAppPasswordAccount("app51", to: daemon)
            await daemon.stop()
            let (file, key) = try await fixture.exportKeepingKey(first)

            let (ownerURL, ownerPassword) = try SharedStoreHosts.createDatabase(on: database)
            await (try await SeededSharedStore(url: ownerURL, password: ownerPassword, tenant: SharedStoreHosts.ownerTenant,
                                               keyDirectory: directory.file("owner"))).close()
            let password = try SharedStoreHosts.createTenantRole("carol", in: "blueskyd", on: database)
            let url = database.url(user: "carol", database: "blueskyd") + "?sslmode=disable"
            let trust = ["ca_file = \"\(testbed.caFile)\"", "plc_url = \"\(testbed.plcURL)\""]
            let config = try SharedStoreHosts.writeConfiguration(in: directory.path, url: url, password: password, tenant: "carol",
                                                                 extraLines: trust)
            let hostState = directory.path + "/host0/state"
            let importing = ["store", "import", "--config", config, "--state-directory", hostState, "--from", file, "--key-file", key]

            let badCA = directory.path + "/bad-ca.toml"
            try (try String(contentsOfFile: config, encoding: .utf8).replacingOccurrences(of: testbed.caFile, with: directory.path + "/none.pem"))
                .write(toFile: badCA, atomically: true, encoding: .utf8)
            let refused = try await fixture.blueskyd(["store", "import", "--config", badCA, "--state-directory", hostState,
                                                      "--from", file, "--key-file", key, "--check"])
            #expect(refused.status == 78, "\(refused.stderr)")
            #expect(try database.psql("SELECT count(*) FROM account", database: "blueskyd") == "0", "nothing written")
            #expect(!FileManager.default.fileExists(atPath: hostState + "/store.key"), "no key left beside an empty tenant")
            let shortLease = directory.path + "/short-lease.toml"
            try (try String(contentsOfFile: config, encoding: .utf8) + "lease_seconds = 15\nupstream_timeout_seconds = 10\n")
                .write(toFile: shortLease, atomically: true, encoding: .utf8)
            let leaseRefused = try await fixture.blueskyd(["store", "import", "--config", shortLease, "--state-directory", hostState,
                                                           "--from", file, "--key-file", key, "--check"])
            #expect(leaseRefused.status == 78 && leaseRefused.stderr.contains("lease_seconds"), "\(leaseRefused.stderr)")
            #expect(try database.psql("SELECT count(*) FROM account", database: "blueskyd") == "0", "nothing written")

            let imported = try await fixture.blueskyd(importing + ["--check", "--json"])
            #expect(imported.status == 0, "\(imported.stderr)")
            #expect(imported.json?["check"]?.arrayValue?.map { $0["outcome"] } == ["live"], "\(imported.stdout)")
            let keyBytes = try Data(contentsOf: URL(fileURLWithPath: hostState + "/store.key"))
            #expect(keyBytes == (try Data(contentsOf: URL(fileURLWithPath: key))), "the host has the export's key")
            #expect(try database.psql("SELECT count(*) FROM blueskyd_host WHERE alive_until > 0", database: "blueskyd") == "0",
                    "the check's host said it stopped")

            daemon = fixture.keep(try await DaemonProcess(directory: directory.path + "/host0", testbed: testbed,
                                                          extraArguments: ["--config", config]))
            try await StoreCopyTests.expectWorks(daemon, app)
        }
    }

    @Test("""
        a server whose refusal carries terminal escapes and 200 KB of text: the check's report and log escape every \
        control character and carry at most a cut of it, and the account's stored reason stays short
        """, .timeLimit(.minutes(5)))
    func hostileRefusal() async throws {
        try await StoreMoveFixture.with("blueskyd-import-check-hostile") { fixture in
            let first = fixture.directory.path + "/first"
            try FileManager.default.createDirectory(atPath: first, withIntermediateDirectories: true)
            var daemon = try await fixture.start(first)
            let app = try await fixture.addAppPasswordAccount("app61", to: daemon)
            await daemon.stop()
            let (file, key) = try await fixture.exportKeepingKey(first)
            let config = fixture.directory.path + "/check.toml"
            try "ca_file = \"\(fixture.testbed.caFile)\"\nplc_url = \"\(fixture.testbed.plcURL)\"\n"
                .write(toFile: config, atomically: true, encoding: .utf8)

            let hostile = "Refused\u{1B}[2J\u{1B}]0;owned\u{07}\r\nfake log line\u{9B}31m" + String(repeating: "x", count: 200_000)
            fixture.testbed.injectFailures(nsid: "com.atproto.server.refreshSession", status: 400, count: 1, error: hostile)
            let second = fixture.directory.path + "/second"
            let imported = try await fixture.blueskyd(["store", "import", "--config", config, "--state-directory", second + "/state",
                                                       "--from", file, "--key-file", key, "--check"])
            #expect(imported.status == 0, "\(imported.stderr.prefix(2_000))")
            for (name, text) in [("stdout", imported.stdout), ("stderr", imported.stderr)] {
                #expect(!text.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 || $0.value == 0x9B }, "\(name)")
                #expect(text.utf8.count < 8_000, "\(name): \(text.utf8.count) bytes")
            }
            #expect(imported.stdout.contains("Refused\\u{1B}[2J"), "\(imported.stdout.prefix(2_000))")

            daemon = try await fixture.start(second)
            let listed = try await daemon.call("accounts.list")["accounts"]?.arrayValue ?? []
            let reason = listed.first { $0["did"]?.stringValue == app }?["stateReason"]?.stringValue ?? ""
            #expect(!reason.isEmpty && reason.utf8.count <= 1_100, "\(reason.utf8.count) bytes")
        }
    }
}
