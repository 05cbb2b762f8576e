import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

/// A state directory on a 4 MiB tmpfs (private to the test's mount namespace), filled up while
/// accounts fall due.
@Suite("A full disk under the state directory")
struct StoreFailureTests {
    @Test("a full disk: no spin, 'store unavailable' shown and logged once, nothing lost; every account works once space returns and after a restart")
    func fullDisk() async throws {
        let settings = try TemporaryDirectory("blueskyd-full-disk")
        defer { settings.remove() }
        let config = settings.file("blueskyd.toml")
        try "retry_initial_seconds = 1\nretry_max_seconds = 2\n".write(toFile: config, atomically: true, encoding: .utf8)
        try await EndToEndFixture.with(names: ["alice", "bob"], accessTokenLifetime: .seconds(4),
                                       daemonArguments: ["--config", config],
                                       configureTestbed: { $0.oauthAccessTokenLifetime = .seconds(4) }) { fixture in
            let (alice, bob, testbed) = (fixture.accounts[0], fixture.accounts[1], fixture.testbed)
            try await fixture.loginWithBskyctl(alice.handle, browser: fixture.browser)
            let login = try await fixture.bskyctl(["login", bob.handle, "--app-password"], stdin: bob.appPassword + "\n")
            try #require(login.status == 0, "\(login.stderr)")

            // Move the state directory onto a small tmpfs.
            await fixture.daemon.stop()
            let state = fixture.daemon.stateDirectory
            let saved = settings.file("state-copy")
            try run("/bin/cp", ["-a", state, saved])
            try run("/bin/mount", ["-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", state])
            defer { _ = try? run("/bin/umount", ["-l", state]) }
            try run("/bin/sh", ["-c", "cp -a '\(saved)'/. '\(state)'/"])
            try await fixture.restartDaemon()
            #expect(try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--param", "actor=\(bob.did)", "--account", bob.did]).status == 0)

            // Fill it up while both accounts fall due (their 4-second tokens refresh every 3 s).
            let filler = state + "/filler"
            _ = try? run("/bin/dd", ["if=/dev/zero", "of=\(filler)", "bs=64k"])
            let reported = try await eventually(timeout: .seconds(30)) {
                try await fixture.daemon.call("daemon.status")["storeUnavailable"] != .null
            }
            #expect(reported, "daemon.status reports the store outage")
            let status = try await fixture.bskyctl(["status"])
            #expect(status.stdout.contains("store:         unavailable:"), "\(status.stdout)")

            // Ten seconds of a full disk with accounts due: the daemon stays near idle.
            let cpuBefore = try cpuSeconds(pid: fixture.daemon.pid)
            try await Task.sleep(for: .seconds(10))
            let cpuUsed = try cpuSeconds(pid: fixture.daemon.pid) - cpuBefore
            #expect(cpuUsed < 1.0, "the daemon used \(cpuUsed) s of CPU in 10 s of a full disk")
            let listed = try await fixture.listedAccounts()
            #expect(listed.values.allSatisfy { $0["state"] != "needs-login" }, "\(listed)")
            let outageLines = fixture.daemon.log.components(separatedBy: "the account store cannot be written").count - 1
            #expect(outageLines == 1, "the outage is logged once, not per attempt (saw \(outageLines))")

            // Space returns: both accounts are refreshed again, and the outage ends.
            try FileManager.default.removeItem(atPath: filler)
            let recovered = try await eventually(timeout: .seconds(30)) {
                let status = try await fixture.daemon.call("daemon.status")
                let accounts = try await fixture.listedAccounts()
                return status["storeUnavailable"] == .null && accounts.values.allSatisfy { $0["state"] == "active" }
            }
            let afterwards = try await fixture.listedAccounts()
            #expect(recovered, "\(afterwards)")
            let refreshesSoFar = testbed.oauthStats(did: alice.did).refreshes
            let goesOn = await eventually(timeout: .seconds(20)) { testbed.oauthStats(did: alice.did).refreshes > refreshesSoFar }
            #expect(goesOn, "scheduled refreshes go on")

            // And after a restart: what was saved is the latest, for both kinds.
            try await fixture.restartDaemon()
            for account in [alice, bob] {
                let call = try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--param", "actor=\(account.did)",
                                                      "--account", account.did])
                #expect(call.status == 0, "\(account.handle): \(call.stderr)")
            }
            let oauth = testbed.oauthStats(did: alice.did)
            #expect(oauth.refreshTokenReplays == 0 && oauth.invalidGrants == 0, "no spent token was sent again")
            #expect(testbed.stats(did: bob.did).rejectedRefreshes == 0)
        }
    }

    @discardableResult
    private func run(_ executable: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CommandFailure(description: "\(executable) \(arguments.joined(separator: " ")): \(text)")
        }
        return text
    }

    struct CommandFailure: Error, CustomStringConvertible { var description: String }

    /// User plus system CPU time of a process, in seconds (from /proc, in clock ticks of 1/100 s).
    private func cpuSeconds(pid: Int32) throws -> Double {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
        let fields = stat[stat.index(after: stat.lastIndex(of: ")")!)...].split(separator: " ")
        return (Double(fields[11]) ?? 0) / 100 + (Double(fields[12]) ?? 0) / 100
    }
}
