import ATTestbed
import AccountStoreCore
import BlueskyTesting
import DaemonHarness
import Foundation
import JSONRPC
import Testing

/// A host of a PostgreSQL tenant that starts, with the old key, while `store rekey` runs (a
/// blind attack did this between the pass's first check and its commit, and the host ran on a
/// key that opened nothing any more).
@Suite("A host that starts during a rekey")
struct StoreRekeyRaceTests {
    @Test("""
        a host started with the old key while a rekey of 1,000 accounts runs: either it waits for the pass and is \
        refused (78), or the pass finds it alive and writes nothing (75); never both running, five rounds
        """, .timeLimit(.minutes(6)))
    func hostStartsDuringRekey() async throws {
        try HermeticNetwork.require()
        let directory = try TemporaryDirectory("blueskyd-rekey-race")
        let database = try await offThePool { try PostgresServer.start() }
        var host: DaemonProcess?
        try await withTearDown {
            await host?.stop()
            database.destroy()
            directory.remove()
        } run: {
            let (url, password) = try SharedStoreHosts.createDatabase(on: database)
            let tenant = SharedStoreHosts.ownerTenant
            let seeding = try await SeededSharedStore(url: url, password: password, tenant: tenant, keyDirectory: directory.file("seeding"))
            try await StoreRekeyWhileRunningTests.writeIdle(1_000, named: "race", into: seeding)
            await seeding.close()
            let config = try SharedStoreHosts.writeConfiguration(in: directory.path, url: url, password: password, tenant: tenant,
                                                                 extraLines: ["lease_seconds = 10", "upstream_timeout_seconds = 5"])
            var keyHex = seeding.keyHex
            // One pass timed alone: the host starts at a random moment within that time.
            let timedState = directory.path + "/timed/state"
            try SharedStoreHosts.provisionKey(keyHex, stateDirectory: timedState)
            let timedHex = SharedStoreHosts.randomKeyHex()
            try StoreRekeyTests.writeKey(timedHex, to: directory.path + "/timed.key")
            let started = ContinuousClock.now
            let timed = try await CommandResult.run(Binaries.path("blueskyd"), [
                "store", "rekey", "--config", config, "--state-directory", timedState, "--new-key-file", directory.path + "/timed.key"])
            let duration = ContinuousClock.now - started
            #expect(timed.status == 0, "\(timed.stderr)")
            keyHex = timedHex
            var outcomes: [String] = []
            for round in 0..<5 {
                let state = directory.path + "/rekeyer\(round)/state"
                try SharedStoreHosts.provisionKey(keyHex, stateDirectory: state)
                let newHex = SharedStoreHosts.randomKeyHex()
                let newKeyFile = directory.path + "/new\(round).key"
                try StoreRekeyTests.writeKey(newHex, to: newKeyFile)
                let rekey = Process()
                rekey.executableURL = URL(fileURLWithPath: Binaries.path("blueskyd"))
                rekey.arguments = ["store", "rekey", "--config", config, "--state-directory", state, "--new-key-file", newKeyFile]
                let errors = Pipe()
                rekey.standardOutput = FileHandle.nullDevice
                rekey.standardError = errors
                try rekey.run()
                try await Task.sleep(for: duration * Double.random(in: 0.05...0.9))
                var hostStarted = false
                do {
                    host = try await SharedStoreHosts.startHost(0, in: directory.path, keyHex: keyHex, config: config, testbed: nil,
                                                                readyTimeout: .seconds(90))
                    hostStarted = true
                } catch DaemonProcessError.exited(let status, let log) {
                    #expect(status == 78 && (log.contains("does not open") || log.contains("which this host does not hold")), "round \(round): \(log)")
                }
                let status = try await offThePool { rekey.waitUntilExit(); return rekey.terminationStatus }
                let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                if hostStarted {
                    #expect(status == 75 && said.contains("running"), "round \(round): the host runs, so the rekey must not: \(status) \(said)")
                    await host?.stop()
                    host = nil
                    outcomes.append("pass refused")
                } else {
                    #expect(status == 0, "round \(round): \(said)")
                    keyHex = newHex
                    outcomes.append("host refused")
                }
            }
            print("rekey race (a pass alone: \(duration)): \(outcomes.joined(separator: ", "))")
        }
    }
}
