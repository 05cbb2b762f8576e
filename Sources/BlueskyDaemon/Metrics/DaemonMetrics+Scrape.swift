import AccountStoreCore
import Foundation
import Prometheus

/// The values a scrape reads from the daemon as it is now.
struct ScrapedValues: Sendable {
    var accounts: AccountCensus
    var subscribers: Int
    var unsavedTokens: Int
    /// The store's current outage: when it began, writes refused since.
    var outage: (since: Date, failedWrites: Int)? = nil
    /// Subscribers told of missed events (`events.gap`), and the events they missed: totals.
    var eventGaps: Int = 0
    var eventsMissed: Int = 0
    /// DPoP nonce challenges answered by signing again: total.
    var nonceChallenges: Int = 0
    /// One entry per account, only with `metrics_per_account = true`.
    var perAccount: [AccountSample]? = nil
}

/// What a per-account series says about one account (named by its DID, public and stable).
struct AccountSample: Sendable, Hashable {
    var did: String
    var active: Bool
    /// Seconds until its access token expires (negative once it has).
    var accessExpiresIn: Double?
}

/// The gauges of one account.
struct AccountSeries: @unchecked Sendable {
    let active: Gauge
    let expiresIn: Gauge
}

extension DaemonMetrics {
    /// The text exposition, with the values read now.
    func exposition(_ values: ScrapedValues, now: Date = Date()) -> [UInt8] {
        for state in AccountState.allCases {
            registry.makeGauge(name: "blueskyd_accounts", labels: [("state", state.rawValue)],
                               help: "Registered accounts by state").set(Double(values.accounts.count(state)))
        }
        registry.makeGauge(name: "blueskyd_event_subscribers", help: "Connections subscribed to events")
            .set(Double(values.subscribers))
        registry.makeGauge(name: "blueskyd_unsaved_rotated_tokens", help: "Accounts holding rotated tokens the store has not saved yet")
            .set(Double(values.unsavedTokens))
        registry.makeGauge(name: "blueskyd_store_outage_seconds", help: "How long the account store has refused writes (0: it takes them)")
            .set(values.outage.map { max(0, now.timeIntervalSince($0.since)) } ?? 0)
        registry.makeGauge(name: "blueskyd_store_outage_failed_writes", help: "Writes the store refused during the current outage")
            .set(Double(values.outage?.failedWrites ?? 0))
        exportTotal("blueskyd_event_gaps_total", help: "events.gap notices sent to subscribers", values.eventGaps)
        exportTotal("blueskyd_events_missed_total", help: "Events subscribers missed (dropped from a full backlog)", values.eventsMissed)
        exportTotal("blueskyd_dpop_nonce_challenges_total", help: "DPoP nonce challenges answered by signing again", values.nonceChallenges)
        if let samples = values.perAccount { exportPerAccount(samples) }
        return registry.emitToBuffer()
    }

    /// The same, from the old arguments (tests).
    func exposition(accounts: AccountCensus, subscribers: Int, unsavedTokens: Int,
                    outage: (since: Date, failedWrites: Int)? = nil, now: Date = Date()) -> [UInt8] {
        exposition(ScrapedValues(accounts: accounts, subscribers: subscribers, unsavedTokens: unsavedTokens, outage: outage), now: now)
    }

    /// A total the daemon keeps itself, exported as a counter: it grows by what it grew since
    /// the last scrape.
    private func exportTotal(_ name: String, help: String, _ value: Int) {
        let counter = registry.makeCounter(name: name, labels: [], help: help)
        let growth = exported.withLock { exported in
            let growth = value - (exported[name] ?? 0)
            exported[name] = max(value, exported[name] ?? 0)
            return growth
        }
        if growth > 0 { counter.increment(by: Int64(growth)) }
    }

    /// One series pair per account, and none for an account that is gone.
    private func exportPerAccount(_ samples: [AccountSample]) {
        let present = Set(samples.map(\.did))
        accountSeries.withLock { series in
            for (did, gone) in series where !present.contains(did) {
                registry.unregisterGauge(gone.active)
                registry.unregisterGauge(gone.expiresIn)
                series[did] = nil
            }
            for sample in samples {
                let entry = series[sample.did] ?? AccountSeries(
                    active: registry.makeGauge(name: "blueskyd_account_active", labels: [("account", sample.did)],
                                               help: "1 while the account's session is usable (metrics_per_account)"),
                    expiresIn: registry.makeGauge(name: "blueskyd_account_access_expires_in_seconds", labels: [("account", sample.did)],
                                                  help: "Seconds until the account's access token expires (metrics_per_account)"))
                series[sample.did] = entry
                entry.active.set(sample.active ? 1.0 : 0.0)
                entry.expiresIn.set(sample.accessExpiresIn ?? 0)
            }
        }
    }
}
