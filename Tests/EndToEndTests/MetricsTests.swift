import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import DaemonHarness
import Testing

/// The metrics socket, scraped as Prometheus would and read with Prometheus's own parser.
@Suite("Metrics: Prometheus text on the metrics socket, read by prometheus_client's parser")
struct MetricsTests {
    static let parser = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("parse_metrics.py").path

    /// `bskyctl metrics`, parsed: value by `name{label=value,...}` (labels sorted).
    static func scrape(_ fixture: EndToEndFixture) async throws -> [String: Double] {
        let text = try await fixture.bskyctl(["metrics"])
        try #require(text.status == 0, "\(text.stderr)")
        let parsed = try await CommandResult.run("/usr/bin/env", ["python3", parser], stdin: text.stdout)
        try #require(parsed.status == 0, "prometheus_client refuses the text (make deps installs it): \(parsed.stderr)")
        var values: [String: Double] = [:]
        for sample in try #require(parsed.json?.arrayValue) {
            let labels = (sample["labels"]?.objectValue ?? [:]).sorted { $0.key < $1.key }
                .map { "\($0.key)=\($0.value.stringValue ?? "")" }.joined(separator: ",")
            values["\(sample["name"]?.stringValue ?? ""){\(labels)}"] = sample["value"]?.doubleValue
        }
        return values
    }

    @Test("counters move with refreshes, calls on both fronts and refusals; accounts by state; no series names an account")
    func scrapeAndCount() async throws {
        try await EndToEndFixture.with { fixture in
            try await fixture.loginAll()
            let (alice, bob) = (fixture.accounts[0], fixture.accounts[1])
            let before = try await Self.scrape(fixture)
            #expect(before["blueskyd_accounts{state=active}"] == 2)
            #expect(before["blueskyd_accounts{state=needs-login}"] == 0)

            for _ in 0..<3 {
                let call = try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--param", "actor=\(alice.did)"])
                #expect(call.status == 0, "\(call.stderr)")
            }
            for _ in 0..<2 {
                let call = try await GatewayTests.curl(fixture.daemon.gatewaySocketPath, "/xrpc/app.bsky.actor.getProfile?actor=\(bob.did)")
                #expect(call.status == 200)
            }
            let refused = try await GatewayTests.curl(fixture.daemon.gatewaySocketPath, "/xrpc/com.atproto.server.getSession",
                                                      ["-H", "Origin: https://evil.example"])
            #expect(refused.status == 403)
            #expect(try await fixture.bskyctl(["refresh", alice.handle]).status == 0)

            let after = try await Self.scrape(fixture)
            func moved(_ key: String) -> Double { (after[key] ?? 0) - (before[key] ?? 0) }
            #expect(moved("blueskyd_proxied_calls_total{front=jsonrpc,status=2xx}") == 3)
            #expect(moved("blueskyd_proxied_calls_total{front=gateway,status=2xx}") == 2)
            #expect(moved("blueskyd_proxy_added_latency_seconds_count{front=jsonrpc}") == 3)
            #expect(moved("blueskyd_proxy_added_latency_seconds_count{front=gateway}") == 2)
            #expect(moved("blueskyd_gateway_refusals_total{reason=browser}") == 1)
            #expect(moved("blueskyd_refreshes_total{kind=app-password,outcome=rotated}") >= 1, "\(after.keys.sorted())")
            #expect(after["blueskyd_accounts{state=active}"] == 2)

            // Fixed label sets: nothing names an account, so 1,000 accounts add no series.
            let text = try await fixture.bskyctl(["metrics"]).stdout
            for account in [alice, bob] {
                #expect(!text.contains(account.did) && !text.contains(account.handle))
            }
            #expect(Set(after.keys).subtracting(before.keys).allSatisfy { $0.hasPrefix("blueskyd_gateway_refusals_total") },
                    "only the refusal reason seen for the first time adds a series: \(Set(after.keys).subtracting(before.keys))")
        }
    }

    @Test("1,000 more accounts add no series; metrics_per_account adds two per account (and drops a removed one's); metrics_listen serves another local user over TCP")
    func seriesAndAccounts() async throws {
        func config(perAccount: Bool) -> String {
            "metrics_listen = \"127.0.0.1:0\"\nmetrics_per_account = \(perAccount)\n"
        }
        try await EndToEndFixture.with(names: ["alice"], logLevel: "info", daemonConfigFile: { _ in config(perAccount: false) }) { fixture in
            try await fixture.loginAll()
            let one = try await Self.scrape(fixture)
            #expect(one["blueskyd_accounts{state=active}"] == 1)

            // 1,000 signed-in OAuth accounts, written into the store as logins would have.
            await fixture.daemon.stop()
            let minted = try SeededOAuthAccounts.mint(at: fixture.testbed, names: (0..<1000).map { "many\($0)" },
                                                      accessExpiresAt: Date().addingTimeInterval(3600))
            try await SeededLocalStore.write(stateDirectory: fixture.daemon.stateDirectory, count: minted.count) { index in
                SeededOAuthAccounts.account(minted[index].session, key: minted[index].key, isDefault: false,
                                            issuer: fixture.testbed.oauthIssuer, pdsURL: fixture.testbed.pdsURL, issuedAt: Date())
            }
            try await fixture.restartDaemon()
            let many = try await Self.scrape(fixture)
            #expect(many["blueskyd_accounts{state=active}"] == 1001)
            #expect(Set(many.keys) == Set(one.keys), "the same series: \(Set(many.keys).symmetricDifference(one.keys).sorted().prefix(10))")

            // Asked for: two series per account, named by DID.
            try config(perAccount: true).write(toFile: fixture.directory.file("blueskyd.toml"), atomically: true, encoding: .utf8)
            try await fixture.restartDaemon()
            let perAccount = try await Self.scrape(fixture)
            #expect(perAccount.count == one.count + 2 * 1001, "\(perAccount.count) series against \(one.count)")
            let alice = fixture.accounts[0]
            #expect(perAccount["blueskyd_account_active{account=\(alice.did)}"] == 1)
            #expect((perAccount["blueskyd_account_access_expires_in_seconds{account=\(alice.did)}"] ?? 0) > 0)
            #expect(try await fixture.bskyctl(["logout", alice.handle]).status == 0)
            let afterLogout = try await Self.scrape(fixture)
            #expect(afterLogout["blueskyd_account_active{account=\(alice.did)}"] == nil, "a removed account's series go")
            #expect(afterLogout.count == perAccount.count - 2)

            // The TCP listener: any local user may scrape (a Prometheus of its own uid).
            let listen = try #require(try await fixture.daemon.call("daemon.info")["metricsListen"]?.stringValue)
            #expect(listen.hasPrefix("127.0.0.1:") && !listen.hasSuffix(":0"), "\(listen)")
            let other = try await CommandResult.run("/usr/bin/setpriv", [
                "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/curl", "--silent", "--show-error",
                "http://\(listen)/metrics"])
            #expect(other.status == 0 && other.stdout.contains("blueskyd_accounts{state=\"active\"} 1000"), "\(other.stderr)")
        }
    }
}
