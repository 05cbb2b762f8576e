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
