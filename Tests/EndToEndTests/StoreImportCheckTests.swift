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
            let file = fixture.directory.path + "/old.export"
            let firstStore = ["--config", fixture.emptyConfig, "--state-directory", first + "/state"]
            let exported = try await fixture.blueskyd(["store", "export"] + firstStore + ["--to", file])
            #expect(exported.status == 0, "\(exported.stderr)")
            let key = fixture.directory.path + "/first.key"
            try FileManager.default.copyItem(atPath: first + "/state/store.key", toPath: key)

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
}
