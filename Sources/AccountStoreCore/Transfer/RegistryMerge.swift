import Foundation
import Synchronization

/// A registry merged into a store that holds accounts (`store copy --merge`, `store import
/// --merge`): which side's row each account keeps.
///
/// An account is the same on both sides when its DID is (an OAuth 2.0 account's DID is its
/// server and subject). It keeps the newer session: the one whose tokens were issued later (its
/// last refresh, else its login), because a refresh token rotated since is spent and the older
/// session's would be refused. A tie keeps the target's, the store in use. The default stays the
/// target's, unless it has none. The decisions are pure and made as the rows stream past; the
/// writing is the target's whole-or-nothing replacement (`importRegistry(replacing:)`).
public final class RegistryMerge: Sendable {
    public enum Side: String, Sendable { case source, target }

    /// An account both sides hold, and the side whose row it keeps.
    public struct Decision: Sendable, Equatable {
        public var did: String
        public var kept: Side
        public var sourceIssuedAt: Date
        public var targetIssuedAt: Date
    }

    /// What the target holds of an account, as the merge needs it.
    public struct Held: Sendable {
        public var id: UUID
        public var issuedAt: Date

        public init(id: UUID, issuedAt: Date) {
            self.id = id
            self.issuedAt = issuedAt
        }
    }

    private struct Tally {
        var decisions: [Decision] = []
        /// The target's rows whose account the source's newer row replaces.
        var replaced: Set<UUID> = []
        var added = 0
    }

    private let held: [String: Held]
    /// The DID of the target's default account, which stays the default.
    private let targetDefault: String?
    private let tally = Mutex(Tally())

    public init(held: [String: Held], targetDefault: String?) {
        self.held = held
        self.targetDefault = targetDefault
    }

    /// Reads the target's accounts (metadata only), a page at a time.
    public static func reading(_ target: any AccountStore) async throws(StoreError) -> RegistryMerge {
        var held: [String: Held] = [:]
        var targetDefault: String?
        var after: AccountPageKey?
        while true {
            let page = try await target.accounts(after: after, limit: 5_000)
            guard let last = page.last else { break }
            for record in page {
                held[record.did] = Held(id: record.id, issuedAt: issuedAt(record))
                if record.isDefault { targetDefault = record.did }
            }
            after = AccountPageKey(createdAt: last.createdAt, id: last.id)
        }
        return RegistryMerge(held: held, targetDefault: targetDefault)
    }

    /// When a session's tokens were issued: its last refresh, else its login.
    public static func issuedAt(_ record: AccountRecord) -> Date {
        max(record.lastRefreshAt ?? record.createdAt, record.oauth?.sessionStartedAt ?? record.createdAt)
    }

    /// A source account as the merged store gets it (its default flag set), or nil when the
    /// target's row is kept.
    public func admit(_ record: AccountRecord) -> AccountRecord? {
        var record = record
        if targetDefault != nil { record.isDefault = record.did == targetDefault }
        let issued = Self.issuedAt(record)
        guard let mine = held[record.did] else {
            tally.withLock { $0.added += 1 }
            return record
        }
        let kept: Side = issued > mine.issuedAt ? .source : .target
        tally.withLock {
            $0.decisions.append(Decision(did: record.did, kept: kept, sourceIssuedAt: issued, targetIssuedAt: mine.issuedAt))
            if kept == .source { $0.replaced.insert(mine.id) }
        }
        return kept == .source ? record : nil
    }

    /// Whether the target keeps its row `id`: not when the source's newer row replaced it.
    /// Asked after every source account was admitted.
    public func keeps(_ id: UUID) -> Bool {
        !tally.withLock { $0.replaced.contains(id) }
    }

    /// The accounts both sides held, in the order the source gave them.
    public var decisions: [Decision] { tally.withLock { $0.decisions } }
    /// Source accounts the target did not hold.
    public var added: Int { tally.withLock { $0.added } }
    public var targetAccounts: Int { held.count }

    /// The client keys of both: the target's, and the source's it lacks. A key id both hold
    /// with different keys is refused: a session signed with one would be sent with the other.
    public static func clientKeys(source: [StoredClientKey], target: [StoredClientKey]) throws(StoreError) -> [StoredClientKey] {
        var merged = target
        var byID = Dictionary(target.map { ($0.keyID, $0) }, uniquingKeysWith: { first, _ in first })
        for key in source {
            if let mine = byID[key.keyID] {
                guard mine.privateKey == key.privateKey else {
                    throw StoreError.database(context: "merging OAuth client keys",
                                              reason: "key \(key.keyID) is another key in each store")
                }
                continue
            }
            byID[key.keyID] = key
            merged.append(key)
        }
        return merged
    }
}

/// The source's rows on their way into a merge: those the merge admits.
public struct MergingWriter: RegistryWriter {
    let inner: any RegistryWriter
    let merge: RegistryMerge
    let side: RegistryMerge.Side

    public init(_ inner: any RegistryWriter, merge: RegistryMerge, side: RegistryMerge.Side) {
        self.inner = inner
        self.merge = merge
        self.side = side
    }

    public func write(_ accounts: [PortableAccount]) async throws(StoreError) {
        let passed: [PortableAccount] = accounts.compactMap { account in
            switch side {
            case .source: merge.admit(account.record).map { PortableAccount(record: $0, secrets: account.secrets) }
            case .target: merge.keeps(account.record.id) ? account : nil
            }
        }
        if !passed.isEmpty { try await inner.write(passed) }
    }
}
