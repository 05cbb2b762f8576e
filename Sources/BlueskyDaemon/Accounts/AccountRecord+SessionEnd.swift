import AccountStoreCore
import Foundation

extension AccountRecord {
    /// How long before a public OAuth session's fixed end the daemon warns (log and status).
    static let sessionEndWarning: TimeInterval = 48 * 3600

    /// True when this is a public OAuth client's session that ends within 48 hours (or has
    /// ended): the user must log in again, refreshes cannot extend it.
    func sessionEndsSoon(now: Date) -> Bool {
        guard let end = oauth?.sessionEndsAt else { return false }
        return end.timeIntervalSince(now) <= Self.sessionEndWarning
    }
}
