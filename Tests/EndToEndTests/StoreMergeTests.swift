import ATTestbed
import AccountStoreCore
import BlueskyTesting
import DaemonHarness
import Foundation
import JSONRPC
import Testing

/// `--merge` as a user needs it: an old export brought back into the store that moved on, and
/// a registry copied into another machine's store in use, without a session lost either way.
@Suite("Merging into a store in use: store import --merge, store copy --merge")
struct StoreMergeTests {
    @Test("""
        an old export merged back keeps the store's newer sessions (its refresh tokens would be spent); a copy merged \
        into another machine's store replaces its stale sessions with the newer ones, adds the missing, keeps its own; \
        every account works after each; without --merge both are refused (73), a dry run writes nothing
        """, .timeLimit(.minutes(5)))
    func mergeBothWays() async throws {
        try await StoreMoveFixture.with("blueskyd-merge") { fixture in
            let (first, second) = (fixture.directory.path + "/first", fixture.directory.path + "/second")
            let oauth = try await fixture.seedOAuthAccount("oauth3", into: first + "/state")
            var daemon = try await fixture.start(first)
            let app1 = try await fixture.addAppPasswordAccount("app31", to: daemon)
            await daemon.stop()
            let file = fixture.directory.path + "/old.export"
            let firstStore = ["--config", fixture.emptyConfig, "--state-directory", first + "/state"]
            let exported = try await fixture.blueskyd(["store", "export"] + firstStore + ["--to", file])
            #expect(exported.status == 0, "\(exported.stderr)")

            // The first machine moves on: both sessions rotate (the export's refresh tokens are
            // spent now), and one more account. Later by the server's clock: a merge tells the
            // newer session by its tokens' `iat`, in whole seconds, and a rotation within the
            // second of the export's would be a tie (kept as the target's).
            fixture.testbed.advanceClock(by: .seconds(2))
            daemon = try await fixture.start(first)
            for did in [oauth, app1] { try await StoreCopyTests.expectWorks(daemon, did) }
            let app2 = try await fixture.addAppPasswordAccount("app32", to: daemon)
            await daemon.stop()

            let plain = try await fixture.blueskyd(["store", "import"] + firstStore + ["--from", file])
            #expect(plain.status == 73 && plain.stderr.contains("--merge"), "\(plain.stderr)")
            let back = try await fixture.blueskyd(["store", "import"] + firstStore + ["--from", file, "--merge", "--json"])
            #expect(back.status == 0, "\(back.stderr)")
            let merged = back.json?["merge"]
            #expect(merged?["added"] == 0 && merged?["kept"] == 2 && merged?["replaced"] == 0, "\(back.stdout)")
            daemon = try await fixture.start(first)
            for did in [oauth, app1, app2] { try await StoreCopyTests.expectWorks(daemon, did) }
            await daemon.stop()

            // A second machine restored from the old export, with an account of its own.
            let key = fixture.directory.path + "/first.key"
            try FileManager.default.copyItem(atPath: first + "/state/store.key", toPath: key)
            let secondStore = ["--config", fixture.emptyConfig, "--state-directory", second + "/state"]
            let restored = try await fixture.blueskyd(["store", "import"] + secondStore + ["--from", file, "--key-file", key])
            #expect(restored.status == 0, "\(restored.stderr)")
            daemon = try await fixture.start(second)
            let app3 = try await fixture.addAppPasswordAccount("app33", to: daemon)
            await daemon.stop()

            let copy = ["store", "copy"] + firstStore + ["--to", second + "/state"]
            let refused = try await fixture.blueskyd(copy)
            #expect(refused.status == 73 && refused.stderr.contains("unless --merge"), "\(refused.stderr)")
            let dry = try await fixture.blueskyd(copy + ["--merge", "--dry-run", "--json"])
            #expect(dry.status == 0 && dry.json?["merge"]?["replaced"] == 2 && dry.json?["merge"]?["added"] == 1, "\(dry.stdout) \(dry.stderr)")
            let copied = try await fixture.blueskyd(copy + ["--merge"])
            #expect(copied.status == 0, "\(copied.stderr)")
            #expect(copied.stdout.contains("1 added, 2 replaced by the source's newer session, 0 kept"), "\(copied.stdout)")
            daemon = try await fixture.start(second)
            let listed = try await daemon.call("accounts.list")["accounts"]?.arrayValue ?? []
            #expect(listed.count == 4, "\(listed)")
            #expect(listed.filter { $0["isDefault"] == true }.map { $0["did"]?.stringValue } == [oauth], "one default, the target's")
            for did in [oauth, app1, app2, app3] { try await StoreCopyTests.expectWorks(daemon, did) }
        }
    }
}
