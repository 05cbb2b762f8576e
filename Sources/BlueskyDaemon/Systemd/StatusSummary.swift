import Foundation

/// The one-line summary systemd shows in `systemctl --user status blueskyd` (STATUS=).
struct StatusSummary: Sendable {
    let accounts: AccountManager
    let reloader: ConfigurationReloader

    /// For example "3 accounts, 1 needs login; next refresh in 4m 12s". Reads counts kept as
    /// accounts change, never every account.
    func line(now: Date = Date()) async -> String {
        let census = accounts.registry.census
        var text = Self.describe(accounts: accounts.registry.count, needsLogin: census.count(.needsLogin),
                                 nextRefresh: await accounts.scheduler.nextScheduled(), now: now,
                                 sessionsEndingSoon: census.sessionsEndingSoon(now: now))
        let altered = census.altered(limit: 0).count
        if altered > 0 { text = "\(altered) account record\(altered == 1 ? "" : "s") without a seal that holds; " + text }
        if let problem = accounts.store.health.problem { text = problem + "; " + text }
        if let note = reloader.statusNote { text += "; " + note }
        return text
    }

    static func describe(accounts: Int, needsLogin: Int, nextRefresh: Date?, now: Date, sessionsEndingSoon: Int = 0) -> String {
        guard accounts > 0 else { return "no accounts yet (add one with bskyctl login)" }
        var text = accounts == 1 ? "1 account" : "\(accounts) accounts"
        if needsLogin > 0 { text += ", \(needsLogin) need\(needsLogin == 1 ? "s" : "") login" }
        if sessionsEndingSoon > 0 {
            text += ", \(sessionsEndingSoon) OAuth session\(sessionsEndingSoon == 1 ? " ends" : "s end") within 48h"
        }
        if let nextRefresh {
            text += "; next refresh " + relative(nextRefresh.timeIntervalSince(now))
        } else {
            text += "; no refresh scheduled"
        }
        return text
    }

    private static func relative(_ seconds: TimeInterval) -> String {
        guard seconds > 0.5 else { return "now" }
        let total = Int(seconds.rounded())
        let (hours, minutes, secs) = (total / 3600, total % 3600 / 60, total % 60)
        if hours > 0 { return "in \(hours)h \(minutes)m" }
        if minutes > 0 { return "in \(minutes)m \(secs)s" }
        return "in \(secs)s"
    }
}
