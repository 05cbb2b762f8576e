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
        try HermeticNetwork.require()
        let directory = try TemporaryDirectory("blueskyd-merge")
        let testbed = try await Testbed.startInHermeticNetwork(directory: directory.file("testbed"))
        var daemons: [DaemonProcess] = []
        try await withTearDown {
            for daemon in daemons { await daemon.stop() }
            try? await testbed.shutdown()
            directory.remove()
        } run: {
            let empty = directory.path + "/empty.toml"
            try "".write(toFile: empty, atomically: true, encoding: .utf8)
            let (first, second) = (directory.path + "/first", directory.path + "/second")
            let minted = try SeededOAuthAccounts.mint(at: testbed, names: ["oauth3"], accessExpiresAt: Date().addingTimeInterval(3600))
            try await SeededLocalStore.write(stateDirectory: first + "/state", count: 1) { _ in
                SeededOAuthAccounts.account(minted[0].session, key: minted[0].key, isDefault: true, issuer: testbed.oauthIssuer,
                                            pdsURL: testbed.pdsURL, issuedAt: Date())
            }
            var daemon = try await DaemonProcess(directory: first, testbed: testbed, extraArguments: ["--config", empty])
            daemons = [daemon]
            let app1 = try await Self.addAppPasswordAccount("app31", to: daemon, testbed: testbed)
            await daemon.stop()
            let (oauth, file) = (minted[0].session.did, directory.path + "/old.export")
            let firstStore = ["--config", empty, "--state-directory", first + "/state"]
            let exported = try await CommandResult.run(Binaries.path("blueskyd"), ["store", "export"] + firstStore + ["--to", file])
            #expect(exported.status == 0, "\(exported.stderr)")

            // The first machine moves on: both sessions rotate (the export's refresh tokens are
            // spent now), and one more account.
            daemon = try await DaemonProcess(directory: first, testbed: testbed, extraArguments: ["--config", empty])
            daemons = [daemon]
            for did in [oauth, app1] { try await StoreCopyTests.expectWorks(daemon, did) }
            let app2 = try await Self.addAppPasswordAccount("app32", to: daemon, testbed: testbed)
            await daemon.stop()

            let plain = try await CommandResult.run(Binaries.path("blueskyd"), ["store", "import"] + firstStore + ["--from", file])
            #expect(plain.status == 73 && plain.stderr.contains("--merge"), "\(plain.stderr)")
            let back = try await CommandResult.run(Binaries.path("blueskyd"), ["store", "import"] + firstStore + ["--from", file, "--merge", "--json"])
            #expect(back.status == 0, "\(back.stderr)")
            let merged = back.json?["merge"]
            #expect(merged?["added"] == 0 && merged?["kept"] == 2 && merged?["replaced"] == 0, "\(back.stdout)")
            daemon = try await DaemonProcess(directory: first, testbed: testbed, extraArguments: ["--config", empty])
            daemons = [daemon]
            for did in [oauth, app1, app2] { try await StoreCopyTests.expectWorks(daemon, did) }
            await daemon.stop()
            daemons = []

            // A second machine restored from the old export, with an account of its own.
            let key = directory.path + "/first.key"
            try FileManager.default.copyItem(atPath: first + "/state/store.key", toPath: key)
            let secondStore = ["--config", empty, "--state-directory", second + "/state"]
            let restored = try await CommandResult.run(Binaries.path("blueskyd"), ["store", "import"] + secondStore + ["--from", file, "--key-file", key])
            #expect(restored.status == 0, "\(restored.stderr)")
            daemon = try await DaemonProcess(directory: second, testbed: testbed, extraArguments: ["--config", empty])
            daemons = [daemon]
            let app3 = try await Self.addAppPasswordAccount("app33", to: daemon, testbed: testbed)
            await daemon.stop()
            daemons = []

            let copy = ["store", "copy"] + firstStore + ["--to", second + "/state"]
            let refused = try await CommandResult.run(Binaries.path("blueskyd"), copy)
            #expect(refused.status == 73 && refused.stderr.contains("unless --merge"), "\(refused.stderr)")
            let dry = try await CommandResult.run(Binaries.path("blueskyd"), copy + ["--merge", "--dry-run", "--json"])
            #expect(dry.status == 0 && dry.json?["merge"]?["replaced"] == 2 && dry.json?["merge"]?["added"] == 1, "\(dry.stdout) \(dry.stderr)")
            let copied = try await CommandResult.run(Binaries.path("blueskyd"), copy + ["--merge"])
            #expect(copied.status == 0, "\(copied.stderr)")
            #expect(copied.stdout.contains("1 added, 2 replaced by the source's newer session, 0 kept"), "\(copied.stdout)")
            daemon = try await DaemonProcess(directory: second, testbed: testbed, extraArguments: ["--config", empty])
            daemons = [daemon]
            let listed = try await daemon.call("accounts.list")["accounts"]?.arrayValue ?? []
            #expect(listed.count == 4, "\(listed)")
            #expect(listed.filter { $0["isDefault"] == true }.map { $0["did"]?.stringValue } == [oauth], "one default, the target's")
            for did in [oauth, app1, app2, app3] { try await StoreCopyTests.expectWorks(daemon, did) }
        }
    }

    static func addAppPasswordAccount(_ name: String, to daemon: DaemonProcess, testbed: Testbed) async throws -> String {
        var spec = AccountSpec(name: name)
        spec.publishWellKnown = true
        let account = await testbed.createAccount(spec)
        _ = try await daemon.call("accounts.add", ["identifier": .string(account.did), "password": .string(account.appPassword)])
        return account.did
    }
}
