import AccountStoreCore
import Foundation

extension AccountRecord {
    /// How long before a public OAuth session's fixed end the daemon warns (log and status).
    static let sessionEndWarning: TimeInterval = 48 * 3600

    /// True when the session ends soon for good (a public atproto client's, within 48 hours;
    /// one without a refresh token) or has ended: only a new login extends it.
    func sessionEndsSoon(now: Date) -> Bool {
        guard let warnAt = sessionEndWarningAt else { return false }
        return now >= warnAt
    }

    /// From when the session's end is near: 48 hours before it, or, for a session that lasts
    /// only as long as one access token (no refresh token), a quarter of that token's life.
    var sessionEndWarningAt: Date? {
        guard let end = sessionEndsAt else { return nil }
        var lead = Self.sessionEndWarning
        if oauth?.clientKind == .oauth2AccessOnly {
            lead = min(lead, max(0, end.timeIntervalSince(lastRefreshAt ?? createdAt)) / 4)
        }
        return end.addingTimeInterval(-lead)
    }
}
