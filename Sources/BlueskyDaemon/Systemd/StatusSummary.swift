import Foundation

/// The one-line summary systemd shows in `systemctl --user status blueskyd` (STATUS=).
struct StatusSummary: Sendable {
    let accounts: AccountManager
    let reloader: ConfigurationReloader

    /// For example "3 accounts, 1 needs login; next refresh in 4m 12s".
    func line(now: Date = Date()) async -> String {
        var needsLogin = 0, endingSoon = 0
        for session in accounts.registry.allSessions {
            let record = await session.record
            if record.state == .needsLogin { needsLogin += 1 } else if record.sessionEndsSoon(now: now) { endingSoon += 1 }
        }
        let count = accounts.registry.count
        var text = Self.describe(accounts: count, needsLogin: needsLogin,
                                 nextRefresh: await accounts.scheduler.nextDue(), now: now, sessionsEndingSoon: endingSoon)
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
