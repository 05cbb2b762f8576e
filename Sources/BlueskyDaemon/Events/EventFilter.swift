import Foundation

/// Which events a subscriber asked for: some kinds, some accounts, or everything.
struct EventFilter: Sendable {
    /// Nil: every kind.
    var kinds: Set<EventKind>?
    /// Account references as given (UUID, DID or handle, case-folded); nil: every account.
    var accounts: Set<String>?

    static let everything = EventFilter(kinds: nil, accounts: nil)

    /// - Parameter references: UUIDs, DIDs or handles (with or without "@").
    init(kinds: Set<EventKind>?, accounts references: [String]?) {
        self.kinds = kinds
        self.accounts = references.map { Set($0.map(Self.folded)) }
    }

    func matches(_ event: PublishedEvent) -> Bool {
        if let kinds, !kinds.contains(event.kind) { return false }
        guard let accounts else { return true }
        guard let account = event.account else { return event.kind.isDaemonWide }
        if accounts.contains(account.id.uuidString.lowercased()) || accounts.contains(account.did) { return true }
        if let handle = account.handle, accounts.contains(AccountRegistry.folded(handle)) { return true }
        return false
    }

    /// UUIDs in lower case (as events carry them), DIDs as they are, handles as the registry folds them.
    private static func folded(_ reference: String) -> String {
        if reference.hasPrefix("did:") { return reference }
        return AccountRegistry.folded(reference.hasPrefix("@") ? String(reference.dropFirst()) : reference)
    }
}

/// One event as published: what filters look at, and its notification line, encoded once
/// and shared by every subscriber and the history.
struct PublishedEvent: Sendable {
    /// What names the account an event is about, for filters.
    struct AccountKeys: Sendable {
        var id: UUID
        var did: String
        var handle: String?
    }

    var seq: UInt64
    var kind: EventKind
    var account: AccountKeys?
    var line: [UInt8]
}
