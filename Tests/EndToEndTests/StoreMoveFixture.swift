import ATTestbed
import BlueskyTesting
import DaemonHarness
import Foundation
import JSONRPC
import Testing

/// What the end-to-end tests of the `blueskyd store` commands share: a testbed, a directory,
/// a PostgreSQL server when asked, an empty configuration file, and every daemon they start
/// (each stopped at the end, however the test ends).
final class StoreMoveFixture: @unchecked Sendable {
    let directory: TemporaryDirectory
    let testbed: Testbed
    let database: PostgresServer?
    /// A configuration file with nothing in it: the defaults, and the state directory given.
    let emptyConfig: String
    private var daemons: [DaemonProcess] = []

    private init(directory: TemporaryDirectory, testbed: Testbed, database: PostgresServer?) throws {
        self.directory = directory
        self.testbed = testbed
        self.database = database
        emptyConfig = directory.path + "/empty.toml"
        try "".write(toFile: emptyConfig, atomically: true, encoding: .utf8)
    }

    static func with(_ name: String, postgres: Bool = false, _ body: (StoreMoveFixture) async throws -> Void) async throws {
        try HermeticNetwork.require()
        let directory = try TemporaryDirectory(name)
        var database: PostgresServer?
        var testbed: Testbed?
        var fixture: StoreMoveFixture?
        try await withTearDown {
            for daemon in fixture?.daemons ?? [] { await daemon.stop() }
            try? await testbed?.shutdown()
            database?.destroy()
            directory.remove()
        } run: {
            if postgres { database = try await offThePool { try PostgresServer.start() } }
            let started = try await Testbed.startInHermeticNetwork(directory: directory.file("testbed"))
            testbed = started
            let ready = try StoreMoveFixture(directory: directory, testbed: started, database: database)
            fixture = ready
            try await body(ready)
        }
    }

    /// blueskyd on `machine` (its state directory `machine/state`) with the empty configuration.
    func start(_ machine: String) async throws -> DaemonProcess {
        let daemon = try await DaemonProcess(directory: machine, testbed: testbed, extraArguments: ["--config", emptyConfig])
        daemons.append(daemon)
        return daemon
    }

    /// A daemon started elsewhere (a host of a shared store), stopped at the end with the rest.
    func keep(_ daemon: DaemonProcess) -> DaemonProcess {
        daemons.append(daemon)
        return daemon
    }

    /// An atproto OAuth session with DPoP written into `state` as a login leaves it; its DID.
    func seedOAuthAccount(_ name: String, into state: String) async throws -> String {
        let minted = try SeededOAuthAccounts.mint(at: testbed, names: [name], accessExpiresAt: Date().addingTimeInterval(3600))
        try await SeededLocalStore.write(stateDirectory: state, count: 1) { _ in
            SeededOAuthAccounts.account(minted[0].session, key: minted[0].key, isDefault: true, issuer: self.testbed.oauthIssuer,
                                        pdsURL: self.testbed.pdsURL, issuedAt: Date())
        }
        return minted[0].session.did
    }

    /// An app-password account added through `daemon`; its DID.
    func addAppPasswordAccount(_ name: String, to daemon: DaemonProcess) async throws -> String {
        var spec = AccountSpec(name: name)
        spec.publishWellKnown = true
        let account = await testbed.createAccount(spec)
        _ = try await daemon.call("accounts.add", ["identifier": .string(account.did), "password": .string(account.appPassword)])
        return account.did
    }

    /// Exports `machine`'s state directory (its daemon stopped) to `<directory>/old.export`, and
    /// keeps its store key apart in `<directory>/kept.key`, as a backup would: (file, key).
    func exportKeepingKey(_ machine: String) async throws -> (file: String, key: String) {
        let (file, key) = (directory.path + "/old.export", directory.path + "/kept.key")
        let exported = try await blueskyd(["store", "export", "--config", emptyConfig, "--state-directory", machine + "/state",
                                           "--to", file])
        #expect(exported.status == 0, "\(exported.stderr)")
        try FileManager.default.copyItem(atPath: machine + "/state/store.key", toPath: key)
        return (file, key)
    }

    /// `blueskyd` with `arguments`, to its end.
    func blueskyd(_ arguments: [String]) async throws -> CommandResult {
        try await CommandResult.run(Binaries.path("blueskyd"), arguments)
    }
}
