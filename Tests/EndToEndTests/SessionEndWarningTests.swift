import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

@Suite("The 48-hour warning before a public OAuth session's fixed end")
struct SessionEndWarningTests {
    @Test("a session logged in 12.5 days ago: the log, daemon.status and bskyctl accounts all say to log in again")
    func warnsTwoDaysAhead() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let alice = fixture.accounts[0]
            _ = try await fixture.oauthLogin(alice.handle, browser: fixture.browser)
            #expect(try await fixture.daemon.call("daemon.status")["oauthSessionsEndingSoon"] == 0)

            // Twelve and a half days pass while blueskyd is stopped: the login's date moves back.
            await fixture.daemon.stop()
            try await Self.moveSessionStart(stateDirectory: fixture.daemon.stateDirectory, byDays: 12.5)
            try await fixture.restartDaemon()

            #expect(fixture.daemon.log.contains("the OAuth session ends soon; log in again to keep the account"),
                    "the warning is logged at start")
            #expect(try await fixture.daemon.call("daemon.status")["oauthSessionsEndingSoon"] == 1)
            let entry = try #require(try await fixture.listedAccounts()[alice.handle])
            #expect(entry["oauth"]?["sessionEndsSoon"] == true)
            let table = try await fixture.bskyctl(["accounts"])
            #expect(table.stdout.contains("oauth session ends in 1d") && table.stdout.contains("log in again soon"),
                    "\(table.stdout)")
            #expect(table.stdout.contains("bskyctl login \(alice.handle)"), "it says which command mends it: \(table.stdout)")
            // The account still works meanwhile.
            #expect(try await fixture.bskyctl(["refresh", alice.handle]).status == 0)
        }
    }

    /// Edits the stopped daemon's registry with the sqlite3 shell, then gives the files back to
    /// the daemon's user (the shell may have created the WAL files as root).
    static func moveSessionStart(stateDirectory: String, byDays days: Double) async throws {
        let database = stateDirectory + "/accounts.sqlite"
        _ = try await ProcessRunner.run("/usr/bin/sqlite3", [
            database, "UPDATE account SET oauth_session_started_at = oauth_session_started_at - \(days * 86_400)",
        ])
        let owner = try FileManager.default.attributesOfItem(atPath: stateDirectory)
        for name in try FileManager.default.contentsOfDirectory(atPath: stateDirectory) {
            try FileManager.default.setAttributes(
                [.ownerAccountID: owner[.ownerAccountID] as Any, .groupOwnerAccountID: owner[.groupOwnerAccountID] as Any],
                ofItemAtPath: stateDirectory + "/" + name)
        }
    }
}
