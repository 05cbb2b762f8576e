import ATTestbed
import AccountStoreCore
import BlueskyTesting
import DaemonHarness
import Foundation
import JSONRPC
import Testing

/// `blueskyd store rekey` as a user runs it after a key leaked: the registry sealed anew, every
/// account working without a login, and the old key opening nothing.
@Suite("A new store key: blueskyd store rekey")
struct StoreRekeyTests {
    @Test("""
        live accounts (atproto OAuth with DPoP, an app password) resealed under a new key answer and rotate without a \
        login; the old key put back is refused (78); a start settles what a kill left between the steps; refusals first: a running daemon (75), a missing key file (78), the \
        store's own key file (64), and a dry run, each writing nothing; a second rekey with the same key has nothing to do
        """, .timeLimit(.minutes(4)))
    func liveAccounts() async throws {
        try await StoreMoveFixture.with("blueskyd-rekey") { fixture in
            let machine = fixture.directory.path + "/machine"
            let state = machine + "/state"
            let oauth = try await fixture.seedOAuthAccount("oauth0", into: state)
            var daemon = try await fixture.start(machine)
            let dids = [oauth, try await fixture.addAppPasswordAccount("app0", to: daemon)]
            let oldKey = try Data(contentsOf: URL(fileURLWithPath: state + "/store.key"))
            let oldFingerprint = try Self.fingerprint(state + "/store.key")
            let newKeyFile = fixture.directory.path + "/new.key"
            try Self.writeKey(SharedStoreHosts.randomKeyHex(), to: newKeyFile)
            let rekey = ["store", "rekey", "--config", fixture.emptyConfig, "--state-directory", state]

            let running = try await fixture.blueskyd(rekey + ["--new-key-file", newKeyFile])
            #expect(running.status == 75 && running.stderr.contains("stop it first"), "\(running.stderr)")
            await daemon.stop()
            let missing = try await fixture.blueskyd(rekey + ["--new-key-file", fixture.directory.path + "/nope.key"])
            #expect(missing.status == 78 && missing.stderr.contains("no store key at"), "\(missing.stderr)")
            let own = try await fixture.blueskyd(rekey + ["--new-key-file", state + "/store.key"])
            #expect(own.status == 64 && own.stderr.contains("the state directory's own key file"), "\(own.stderr)")
            let dry = try await fixture.blueskyd(rekey + ["--new-key-file", newKeyFile, "--dry-run", "--json"])
            #expect(dry.status == 0 && dry.json?["dryRun"] == true && dry.json?["accounts"]?.intValue == 2, "\(dry.stdout) \(dry.stderr)")
            #expect(try Self.fingerprint(state + "/store.key") == oldFingerprint, "a dry run keeps the key")

            let done = try await fixture.blueskyd(rekey + ["--new-key-file", newKeyFile, "--json"])
            #expect(done.status == 0 && done.json?["resealed"]?.intValue == 2, "\(done.stdout) \(done.stderr)")
            #expect(done.json?["previousKeyFingerprint"] != done.json?["keyFingerprint"])
            let installed = try Data(contentsOf: URL(fileURLWithPath: state + "/store.key"))
            #expect(try Self.fingerprint(state + "/store.key") == Self.fingerprint(newKeyFile), "store.key holds the new key")
            #expect(done.json?["keyFingerprint"]?.stringValue == (try Self.fingerprint(newKeyFile)))
            #expect(!FileManager.default.fileExists(atPath: state + "/store.key.next"))
            let again = try await fixture.blueskyd(rekey + ["--new-key-file", newKeyFile])
            #expect(again.status == 0 && again.stdout.contains("already"), "\(again.stdout) \(again.stderr)")

            // The leaked key, put back, opens nothing.
            try oldKey.write(to: URL(fileURLWithPath: state + "/store.key"))
            do {
                daemon = try await fixture.start(machine)
                Issue.record("blueskyd started with the key the store was rekeyed from")
            } catch DaemonProcessError.exited(let status, let log) {
                #expect(status == 78 && log.contains("does not open"), "\(log)")
            }
            // As a rekey killed between its last two steps leaves it: the store sealed with the new
            // key, which waits in store.key.next. The start moves it in place.
            let next = state + "/store.key.next"
            #expect(FileManager.default.createFile(atPath: next, contents: installed, attributes: [.posixPermissions: 0o600]))
            daemon = try await fixture.start(machine)
            #expect(daemon.log.contains("moved store.key.next over store.key"), "\(daemon.log)")
            #expect(try Self.fingerprint(state + "/store.key") == Self.fingerprint(newKeyFile))
            #expect(!FileManager.default.fileExists(atPath: next))
            for did in dids { try await StoreCopyTests.expectWorks(daemon, did) }
            #expect(try await daemon.call("daemon.status")["storeKey"] == done.json?["keyFingerprint"], "daemon.status names the key")

            // As a rekey killed before it replaced the store leaves it: a key in store.key.next that
            // opens nothing. The start removes it and goes on with store.key.
            await daemon.stop()
            #expect(FileManager.default.createFile(atPath: next, contents: oldKey, attributes: [.posixPermissions: 0o600]))
            daemon = try await fixture.start(machine)
            #expect(daemon.log.contains("removed store.key.next"), "\(daemon.log)")
            #expect(!FileManager.default.fileExists(atPath: next))
            for did in dids { try await StoreCopyTests.expectWorks(daemon, did) }
        }
    }

    @Test("""
        a rekey SIGKILLed at random moments (ten rounds) leaves the store sealed with one key or the other, never in \
        part; the next rekey settles it; then blueskyd starts and the live account among a thousand works
        """, .timeLimit(.minutes(6)))
    func killedRekey() async throws {
        try await StoreMoveFixture.with("blueskyd-rekey-kill") { fixture in
            let (directory, testbed) = (fixture.directory, fixture.testbed)
            let count = 1_000
            let machine = directory.path + "/machine"
            let state = machine + "/state"
            let (first, second) = (directory.path + "/first.key", directory.path + "/second.key")
            let firstHex = SharedStoreHosts.randomKeyHex()
            try Self.writeKey(firstHex, to: first)
            try Self.writeKey(SharedStoreHosts.randomKeyHex(), to: second)
            try SharedStoreHosts.provisionKey(firstHex, stateDirectory: state)
            let minted = try SeededOAuthAccounts.mint(at: testbed, names: ["oauth1"], accessExpiresAt: Date().addingTimeInterval(3600))
            let distant = Date().addingTimeInterval(30 * 86_400)
            try await SeededLocalStore.write(stateDirectory: state, count: count) { index in
                if index == 0 {
                    return SeededOAuthAccounts.account(minted[0].session, key: minted[0].key, isDefault: true,
                                                       issuer: testbed.oauthIssuer, pdsURL: testbed.pdsURL, issuedAt: Date())
                }
                return (AccountRecord(did: "did:plc:rekey\(index)", handle: "rekey\(index).test", handleVerified: true,
                                      pds: "https://pds.example.test", authKind: .appPassword,
                                      accessExpiresAt: distant, refreshExpiresAt: distant),
                        AccountSecrets(accessToken: "access-\(index)", refreshToken: "refresh-\(index)"))
            }
            let empty = fixture.emptyConfig
            let rekey = ["store", "rekey", "--config", empty, "--state-directory", state]
            let keys = [try Self.fingerprint(first), try Self.fingerprint(second)]

            try await StoreCopyTests.killAtRandom(rekey + ["--new-key-file", second], rounds: 10) {
                // The dry run settles what a kill left, with whichever key opens the store.
                let settled = try await fixture.blueskyd(rekey + ["--new-key-file", second, "--dry-run", "--json"])
                #expect(settled.status == 0, "\(settled.stderr)")
                #expect(keys.contains(try Self.fingerprint(state + "/store.key")), "store.key holds one of the two keys")
                #expect(!FileManager.default.fileExists(atPath: state + "/store.key.next"), "settled")
                if settled.json?["alreadySealed"] == true { return true }
                #expect(settled.json?["accounts"]?.intValue == count, "whole under the first key: \(settled.stdout)")
                return false
            } reset: {
                let back = try await fixture.blueskyd(rekey + ["--new-key-file", first, "--json"])
                #expect(back.status == 0 && back.json?["resealed"]?.intValue == count, "\(back.stdout) \(back.stderr)")
            }
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: state).filter { $0.hasPrefix(".copy-") }
            #expect(leftovers.isEmpty, "the last rekey cleared what the killed ones left: \(leftovers)")
            #expect(try Self.fingerprint(state + "/store.key") == keys[1])

            let daemon = try await fixture.start(machine)
            #expect(try await daemon.call("accounts.list")["accounts"]?.arrayValue?.count == count)
            try await StoreCopyTests.expectWorks(daemon, minted[0].session.did)
        }
    }

    @Test("""
        two hosts of a PostgreSQL tenant: a rekey while they run without the new key is refused (75); stopped, one host rekeys, starts with \
        the new key and every account works; the other, still on the old key, is refused (78) until it gets the new one
        """, .timeLimit(.minutes(5)))
    func sharedStore() async throws {
        try await StoreMoveFixture.with("blueskyd-rekey-shared", postgres: true) { fixture in
            let (directory, testbed) = (fixture.directory, fixture.testbed)
            let database = try #require(fixture.database)
            let (url, password) = try SharedStoreHosts.createDatabase(on: database)
            let tenant = SharedStoreHosts.ownerTenant
            let seeding = try await SeededSharedStore(url: url, password: password, tenant: tenant, keyDirectory: directory.file("seeding"))
            let minted = try SeededOAuthAccounts.mint(at: testbed, names: ["oauth2"], accessExpiresAt: Date().addingTimeInterval(3600))
            try await seeding.write(count: 1, account: { _ in
                SeededOAuthAccounts.account(minted[0].session, key: minted[0].key, isDefault: true, issuer: testbed.oauthIssuer,
                                            pdsURL: testbed.pdsURL, issuedAt: Date())
            }, due: { _ in Date().addingTimeInterval(3000) })
            await seeding.close()
            let config = try SharedStoreHosts.writeConfiguration(in: directory.path, url: url, password: password, tenant: tenant,
                                                                 extraLines: ["lease_seconds = 10", "upstream_timeout_seconds = 5"])
            var hosts: [DaemonProcess] = []
            for index in 0..<2 {
                hosts.append(fixture.keep(try await SharedStoreHosts.startHost(index, in: directory.path, keyHex: seeding.keyHex,
                                                                               config: config, testbed: testbed)))
            }
            let dids = [minted[0].session.did, try await fixture.addAppPasswordAccount("app2", to: hosts[0])]
            for did in dids { try await StoreCopyTests.expectWorks(hosts[1], did) }

            let newHex = SharedStoreHosts.randomKeyHex()
            let newKeyFile = directory.path + "/new.key"
            try Self.writeKey(newHex, to: newKeyFile)
            let rekey = ["store", "rekey", "--config", config, "--state-directory", directory.path + "/host0/state",
                         "--new-key-file", newKeyFile]
            let busy = try await fixture.blueskyd(rekey)
            #expect(busy.status == 75 && busy.stderr.contains("running without the new key"), "\(busy.stderr)")
            for host in hosts { await host.stop() }

            let done = try await fixture.blueskyd(rekey)
            #expect(done.status == 0 && done.stdout.contains("Resealed 2 accounts"), "\(done.stdout) \(done.stderr)")
            #expect(done.stdout.contains("Every other host of tenant \(tenant) needs the new key"), "\(done.stdout)")
            let host0 = fixture.keep(try await DaemonProcess(directory: directory.path + "/host0", testbed: testbed,
                                                             extraArguments: ["--config", config], logLevel: "info"))
            for did in dids { try await StoreCopyTests.expectWorks(host0, did) }

            do {
                _ = fixture.keep(try await SharedStoreHosts.startHost(1, in: directory.path, keyHex: seeding.keyHex, config: config,
                                                                      testbed: testbed))
                Issue.record("a host with the old key started")
            } catch DaemonProcessError.exited(let status, let log) {
                let newPrint = try Self.fingerprint(newKeyFile)
                #expect(status == 78 && log.contains("seals with the key \(newPrint)"), "\(log)")
            }
            let host1 = fixture.keep(try await SharedStoreHosts.startHost(1, in: directory.path, keyHex: newHex, config: config,
                                                                          testbed: testbed))
            for did in dids { try await StoreCopyTests.expectWorks(host1, did) }
        }
    }

    /// The fingerprint of the key in `path` (`StoreKey.keyFingerprint`, as blueskyd prints it).
    static func fingerprint(_ path: String) throws -> String {
        StoreKey.keyFingerprint(try #require(try StoreKey.existing(keyFile: URL(fileURLWithPath: path))))
    }

    /// A key file as a user makes one (`umask 077; openssl rand -hex 32 > new.key`).
    static func writeKey(_ hex: String, to path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data((hex + "\n").utf8), attributes: [.posixPermissions: 0o600]) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
        }
    }
}
