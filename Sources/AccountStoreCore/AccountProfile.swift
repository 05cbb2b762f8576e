import Foundation

/// Who an account is to people: its Bluesky profile as last fetched (never a secret).
public struct AccountProfile: Sendable, Equatable {
    public var displayName: String?
    /// An https URL of the avatar image.
    public var avatar: String?
    public var description: String?
    public var fetchedAt: Date

    public init(displayName: String?, avatar: String?, description: String?, fetchedAt: Date) {
        self.displayName = displayName
        self.avatar = avatar
        self.description = description
        self.fetchedAt = fetchedAt
    }
}

extension AccountProfile {
    /// The same name, avatar and description, whenever each was fetched.
    public static func sameContent(_ a: AccountProfile?, _ b: AccountProfile?) -> Bool {
        a?.displayName == b?.displayName && a?.avatar == b?.avatar && a?.description == b?.description
            && (a == nil) == (b == nil)
    }
}

/// An immutable box, so that a record without a profile (most, at scale) carries one pointer.
final class AccountProfileBox: Sendable, Equatable {
    let profile: AccountProfile

    init(_ profile: AccountProfile) { self.profile = profile }

    static func == (a: AccountProfileBox, b: AccountProfileBox) -> Bool { a === b || a.profile == b.profile }
}
