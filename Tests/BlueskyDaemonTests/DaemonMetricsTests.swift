import AccountStoreCore
import Foundation
import Testing
@testable import BlueskyDaemon

@Suite("Metrics: what each input counts, in Prometheus text")
struct DaemonMetricsTests {
    /// `name{labels} value` lines of the exposition, comments left out.
    static func lines(_ metrics: DaemonMetrics, outage: (since: Date, failedWrites: Int)? = nil, now: Date = Date()) -> Set<String> {
        let text = String(decoding: metrics.exposition(accounts: AccountCensus(), subscribers: 3, unsavedTokens: 1,
                                                       outage: outage, now: now), as: UTF8.self)
        return Set(text.split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init))
    }

    @Test("refresh outcomes come from the lifecycle's notes; other notes count nothing")
    func refreshOutcomes() {
        let metrics = DaemonMetrics()
        metrics.noted(.refreshed(renamedTo: nil), kind: .oauth)
        metrics.noted(.refreshed(renamedTo: nil), kind: .oauth)
        metrics.noted(.retrying(reason: "503", delay: 5), kind: .appPassword)
        metrics.noted(.needsLogin(reason: "invalid_grant"), kind: .oauth)
        metrics.noted(.saveRefused(reason: "down", delay: 1), kind: .appPassword)
        metrics.noted(.adoptedNewerTokens, kind: .oauth)
        let lines = Self.lines(metrics)
        #expect(lines.contains(#"blueskyd_refreshes_total{kind="oauth",outcome="rotated"} 2"#), "\(lines.sorted())")
        #expect(lines.contains(#"blueskyd_refreshes_total{kind="app-password",outcome="transient"} 1"#))
        #expect(lines.contains(#"blueskyd_refreshes_total{kind="oauth",outcome="definitive"} 1"#))
        #expect(lines.contains(#"blueskyd_refreshes_total{kind="app-password",outcome="save-refused"} 1"#))
        #expect(lines.contains(#"blueskyd_refreshes_total{kind="oauth",outcome="transient"} 0"#))
    }

    @Test("calls by front and status class; the added latency is the call less its time with the PDS")
    func calls() {
        let metrics = DaemonMetrics()
        metrics.proxiedCall(front: .jsonRPC, status: 200, total: .microseconds(300), upstream: .microseconds(240))
        metrics.proxiedCall(front: .gateway, status: 404, total: .microseconds(500), upstream: .microseconds(100))
        metrics.proxiedCall(front: .gateway, status: nil, total: .seconds(1), upstream: .zero)
        metrics.proxiedCall(front: .gateway, status: 200, total: .zero, upstream: nil)
        let lines = Self.lines(metrics)
        #expect(lines.contains(#"blueskyd_proxied_calls_total{front="jsonrpc",status="2xx"} 1"#), "\(lines.sorted())")
        #expect(lines.contains(#"blueskyd_proxied_calls_total{front="gateway",status="4xx"} 1"#))
        #expect(lines.contains(#"blueskyd_proxied_calls_total{front="gateway",status="error"} 1"#))
        #expect(lines.contains(#"blueskyd_proxied_calls_total{front="gateway",status="2xx"} 1"#))
        // 60 µs added for the JSON-RPC call: in the 75 µs bucket, not the 50 µs one.
        #expect(lines.contains(#"blueskyd_proxy_added_latency_seconds_bucket{front="jsonrpc",le="0.00005"} 0"#))
        #expect(lines.contains(#"blueskyd_proxy_added_latency_seconds_bucket{front="jsonrpc",le="0.000075"} 1"#))
        // Neither a failed call nor a streamed one has a latency sample; the 400 µs one does.
        #expect(lines.contains(#"blueskyd_proxy_added_latency_seconds_count{front="gateway"} 1"#))
    }

    @Test("gauges are read at the scrape: subscribers, unsaved tokens, the store's outage")
    func gauges() {
        let metrics = DaemonMetrics()
        let healthy = Self.lines(metrics)
        #expect(healthy.contains("blueskyd_event_subscribers 3.0"), "\(healthy.sorted())")
        #expect(healthy.contains("blueskyd_unsaved_rotated_tokens 1.0"))
        #expect(healthy.contains("blueskyd_store_outage_seconds 0.0"))
        let now = Date()
        let down = Self.lines(metrics, outage: (now.addingTimeInterval(-42), 7), now: now)
        #expect(down.contains("blueskyd_store_outage_seconds 42.0"), "\(down.sorted())")
        #expect(down.contains("blueskyd_store_outage_failed_writes 7.0"))
    }

    static func text(_ metrics: DaemonMetrics, _ values: ScrapedValues) -> Set<String> {
        Set(String(decoding: metrics.exposition(values), as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init))
    }

    @Test("backoffs, refresh exchanges, leases and policy refusals each have their series")
    func upkeep() {
        let metrics = DaemonMetrics()
        metrics.noted(.retrying(reason: "503", delay: 12), kind: .oauth)
        metrics.noted(.saveRefused(reason: "down", delay: 2), kind: .appPassword)
        metrics.refreshExchange(kind: .oauth, took: .milliseconds(80))
        metrics.leaseTaken(takenOver: false)
        metrics.leaseTaken(takenOver: true)
        metrics.policyDenied(client: "reader")
        let lines = Self.lines(metrics)
        #expect(lines.contains(#"blueskyd_backoff_waits_total{kind="oauth"} 1"#), "\(lines.sorted())")
        #expect(lines.contains(#"blueskyd_backoff_waits_total{kind="app-password"} 1"#))
        #expect(lines.contains(#"blueskyd_backoff_wait_seconds_bucket{le="15.0"} 2"#) || lines.contains(#"blueskyd_backoff_wait_seconds_bucket{le="15"} 2"#),
                "\(lines.filter { $0.contains("backoff_wait_seconds") }.sorted())")
        #expect(lines.contains(#"blueskyd_refresh_duration_seconds_bucket{kind="oauth",le="0.1"} 1"#))
        #expect(lines.contains(#"blueskyd_refresh_duration_seconds_bucket{kind="oauth",le="0.05"} 0"#))
        #expect(lines.contains("blueskyd_leases_taken_total 2"))
        #expect(lines.contains("blueskyd_leases_taken_over_total 1"))
        #expect(lines.contains(#"blueskyd_policy_denials_total{client="reader"} 1"#))
    }

    @Test("totals the daemon keeps (event gaps, missed events, nonce challenges) are counters that grow with them")
    func totals() {
        let metrics = DaemonMetrics()
        var values = ScrapedValues(accounts: AccountCensus(), subscribers: 0, unsavedTokens: 0, eventGaps: 2, eventsMissed: 300,
                                   nonceChallenges: 5)
        #expect(Self.text(metrics, values).isSuperset(of: [
            "blueskyd_event_gaps_total 2", "blueskyd_events_missed_total 300", "blueskyd_dpop_nonce_challenges_total 5"]))
        values.nonceChallenges = 9
        #expect(Self.text(metrics, values).contains("blueskyd_dpop_nonce_challenges_total 9"))
        #expect(Self.text(metrics, values).contains("blueskyd_dpop_nonce_challenges_total 9"), "a second scrape adds nothing")
    }

    @Test("per-account series only when asked: two per account, gone with the account")
    func perAccount() {
        let metrics = DaemonMetrics()
        var values = ScrapedValues(accounts: AccountCensus(), subscribers: 0, unsavedTokens: 0)
        let without = Self.text(metrics, values)
        values.perAccount = (0..<1000).map { AccountSample(did: "did:plc:\($0)", active: $0 != 7, accessExpiresIn: 60) }
        let with = Self.text(metrics, values)
        #expect(with.count == without.count + 2000)
        #expect(with.contains(#"blueskyd_account_active{account="did:plc:7"} 0.0"#))
        values.perAccount = [AccountSample(did: "did:plc:1", active: true, accessExpiresIn: 30)]
        let after = Self.text(metrics, values)
        #expect(after.count == without.count + 2)
        #expect(after.contains(#"blueskyd_account_access_expires_in_seconds{account="did:plc:1"} 30.0"#))
    }
}
