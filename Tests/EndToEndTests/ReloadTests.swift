import BlueskyTesting
import Foundation
import JSONRPC
import Testing

@Suite("Reloading the configuration with accounts registered")
struct ReloadTests {
    @Test("a new refresh_ahead_seconds moves every queued refresh at once")
    func reloadMovesTheSchedule() async throws {
        let settings = try TemporaryDirectory("blueskyd-reload-schedule")
        defer { settings.remove() }
        let config = settings.file("blueskyd.toml")
        try "refresh_ahead_seconds = 60\n".write(toFile: config, atomically: true, encoding: .utf8)
        try await EndToEndFixture.with(names: ["gina"], daemonArguments: ["--config", config]) { fixture in
            try await fixture.loginAll()

            func nextRefresh() async throws -> Date? {
                let text = try await fixture.daemon.call("daemon.status")["nextRefreshAt"]?.stringValue
                return text.flatMap { try? Date($0, strategy: .iso8601) }
            }
            let before = try #require(try await nextRefresh(), "an account is scheduled")
            try "refresh_ahead_seconds = 600\n".write(toFile: config, atomically: true, encoding: .utf8)
            kill(fixture.daemon.pid, SIGHUP)
            var after = before
            _ = try await eventually(timeout: .seconds(10)) {
                after = try await nextRefresh() ?? before
                return after != before
            }
            let moved = before.timeIntervalSince(after)
            // Lead times carry up to 20 % jitter: 60-72 s before, 600-720 s after.
            #expect(moved > 526 && moved < 662, "the next refresh came 528 to 660 s earlier, not \(moved) s")
        }
    }
}

@Suite("[[provider]] tables: checked at start and on SIGHUP, applied by a reload")
struct ProviderReloadTests {
    @Test("a mistake in a [[provider]] stops the start naming it; on SIGHUP it is refused and the old table kept; a valid new one is used at once")
    func providers() async throws {
        let settings = try TemporaryDirectory("blueskyd-reload-providers")
        defer { settings.remove() }
        let config = settings.file("blueskyd.toml")
        // At start: the provider, the key, what is wrong.
        try """
            [[provider]]
            name = "neodb"
            issuer = "http://neodb.example"
            """.write(toFile: config, atomically: true, encoding: .utf8)
        let refused = try await CommandResult.run(Binaries.path("blueskyd"), [
            "--config", config, "--state-directory", settings.file("state"), "--socket", settings.file("d.sock"),
        ])
        #expect(refused.status == 78, "\(refused.stderr)")
        #expect(refused.stderr.contains("provider 'neodb': issuer http://neodb.example is not an https URL"), "\(refused.stderr)")

        try "".write(toFile: config, atomically: true, encoding: .utf8)
        try await EndToEndFixture.with(names: ["alice"], daemonArguments: ["--config", config]) { fixture in
            let testbed = fixture.testbed
            testbed.addGenericOAuthUser(subject: "u-1", username: "jo", name: "Jo")
            let unknown = await fixture.rpcErrorName { _ = try await fixture.daemon.call("accounts.oauth.begin", ["identifier": "sso"]) }
            #expect(unknown != nil, "no provider named sso yet")

            try """
                [[provider]]
                name = "sso"
                issuer = "\(testbed.genericOAuthURL)"
                profile_fields = { handle = "preferred_username" }
                """.write(toFile: config, atomically: true, encoding: .utf8)
            kill(fixture.daemon.pid, SIGHUP)
            let logged = try await eventually(timeout: .seconds(10)) { fixture.daemon.log.contains("configuration reload refused") }
            #expect(logged && fixture.daemon.log.contains("profile_fields needs a subject"), "the reload is refused, naming the mistake")

            try """
                [[provider]]
                name = "sso"
                issuer = "\(testbed.genericOAuthURL)"
                """.write(toFile: config, atomically: true, encoding: .utf8)
            kill(fixture.daemon.pid, SIGHUP)
            let applied = try await eventually(timeout: .seconds(10)) {
                (try? await fixture.daemon.call("accounts.oauth.begin", ["identifier": "sso"])) != nil
            }
            #expect(applied, "the new provider is used without a restart")
            let reply = try await fixture.oauthLogin("sso", browser: fixture.browser)
            #expect(reply["account"]?["handle"]?.stringValue?.hasPrefix("jo@") == true, "\(reply)")
        }
    }
}
