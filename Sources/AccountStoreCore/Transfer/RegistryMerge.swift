import Foundation
import Synchronization
import WebBasics

/// A registry merged into a store that holds accounts (`store copy --merge`, `store import
/// --merge`): which side's row each account keeps.
///
/// An account is the same on both sides when its DID is (an OAuth 2.0 account's DID is its
/// server and subject). It keeps the newer session: the one whose tokens were issued later,
/// because a refresh token rotated since is spent and the older session's would be refused. A
/// tie keeps the target's, the store in use. The default stays the target's, unless it has none.
///
/// When were tokens issued is read from the sealed secrets where they say it (the `iat` of a
/// PDS's JWTs), so that nobody who can write the database but has no key can make a merge keep
/// the older session by moving a row's dates (a blind attack did, with `last_refresh_at`). Only
/// when a side's tokens do not say (an OAuth 2.0 server's opaque tokens) do the row's dates
/// decide (its last refresh, else its login), and the report says so. The decisions are pure and
/// made as the rows stream past; the writing is the target's whole-or-nothing replacement
/// (`importRegistry(replacing:)`).
public final class RegistryMerge: Sendable {
    public enum Side: String, Sendable { case source, target }

    /// When a session's tokens were issued, and whether the sealed tokens said so.
    public struct Issued: Sendable, Equatable, Comparable {
        public var at: Date
        /// From the tokens' `iat` (sealed with them), not from the row's dates.
        public var sealed: Bool

        public init(at: Date, sealed: Bool) {
            self.at = at
            self.sealed = sealed
        }

        public static func < (lhs: Issued, rhs: Issued) -> Bool { lhs.at < rhs.at }
    }

    /// An account both sides hold, and the side whose row it keeps.
    public struct Decision: Sendable, Equatable {
        public var did: String
        public var kept: Side
        public var sourceIssuedAt: Date
        public var targetIssuedAt: Date
        /// Decided by the sealed tokens' issue times (else by the rows' dates).
        public var bySealedTokens: Bool
    }

    /// What the target holds of an account, as the merge needs it.
    public struct Held: Sendable {
        public var id: UUID
        public var issued: Issued

        public init(id: UUID, issued: Issued) {
            self.id = id
            self.issued = issued
        }
    }

    private struct Tally {
        var decisions: [Decision] = []
        /// The target's rows whose account the source's newer row replaces.
        var replaced: Set<UUID> = []
        /// The source's accounts the target did not hold, by DID.
        var added: [String] = []
    }

    private let held: [String: Held]
    /// The DID of the target's default account, which stays the default.
    private let targetDefault: String?
    private let tally = Mutex(Tally())

    public init(held: [String: Held], targetDefault: String?) {
        self.held = held
        self.targetDefault = targetDefault
    }

    /// Reads the target's accounts, a page at a time, keeping of each only its id and when its
    /// tokens were issued.
    public static func reading(_ target: any AccountStore) async throws(StoreError) -> RegistryMerge {
        var held: [String: Held] = [:]
        var targetDefault: String?
        var after: AccountPageKey?
        while true {
            let page = try await target.portableAccounts(after: after, limit: RegistryCopy.pageSize)
            guard let last = page.last?.record else { break }
            for account in page {
                held[account.record.did] = Held(id: account.record.id, issued: issued(account))
                if account.record.isDefault { targetDefault = account.record.did }
            }
            after = AccountPageKey(createdAt: last.createdAt, id: last.id)
        }
        return RegistryMerge(held: held, targetDefault: targetDefault)
    }

    /// When a session's tokens were issued: the latest `iat` its sealed tokens carry, else its
    /// row's last refresh, else its login.
    public static func issued(_ account: PortableAccount) -> Issued {
        let claimed = [account.secrets.accessToken, account.secrets.refreshToken].compactMap(issuedAtClaim).max()
        if let claimed { return Issued(at: claimed, sealed: true) }
        let record = account.record
        return Issued(at: max(record.lastRefreshAt ?? record.createdAt, record.oauth?.sessionStartedAt ?? record.createdAt),
                      sealed: false)
    }

    /// The `iat` claim of a compact JWS, unverified (the server that issued it checks it; here it
    /// only orders two sessions of one account); nil when `token` is not one or has none.
    static func issuedAtClaim(_ token: String) -> Date? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = Base64URL.decodeLeniently(parts[1]),
              let object = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any],
              let iat = object["iat"] as? NSNumber else { return nil }
        return Date(timeIntervalSince1970: iat.doubleValue)
    }

    /// A source account as the merged store gets it (its default flag set), or nil when the
    /// target's row is kept.
    public func admit(_ account: PortableAccount) -> PortableAccount? {
        var account = account
        let did = account.record.did
        if targetDefault != nil { account.record.isDefault = did == targetDefault }
        guard let mine = held[did] else {
            tally.withLock { $0.added.append(did) }
            return account
        }
        let theirs = Self.issued(account)
        // Sealed times on both sides, or the rows' dates on both: never one against the other
        // (then the target's is kept: nothing sealed says the source's is newer).
        let bySealed = theirs.sealed && mine.issued.sealed
        let kept: Side = bySealed || (!theirs.sealed && !mine.issued.sealed)
            ? (theirs > mine.issued ? .source : .target)
            : .target
        tally.withLock {
            $0.decisions.append(Decision(did: did, kept: kept, sourceIssuedAt: theirs.at, targetIssuedAt: mine.issued.at,
                                         bySealedTokens: bySealed))
            if kept == .source { $0.replaced.insert(mine.id) }
        }
        guard kept == .source else { return nil }
        // The source's session under the target's id: a client policy naming the account by its
        // id, and anything else that holds the id, still finds it (a blind attack saw every
        // merged account take the source's id, or a new one, unannounced).
        account.record.id = mine.id
        return account
    }

    /// Whether the target keeps its row `id`: not when the source's newer row replaced it.
    /// Asked after every source account was admitted.
    public func keeps(_ id: UUID) -> Bool {
        !tally.withLock { $0.replaced.contains(id) }
    }

    /// The accounts both sides held, in the order the source gave them.
    public var decisions: [Decision] { tally.withLock { $0.decisions } }
    /// Source accounts the target did not hold, by DID.
    public var added: [String] { tally.withLock { $0.added } }
    public var targetAccounts: Int { held.count }
    /// The target's default account, which it keeps (its id too: a merge keeps the target's
    /// ids); nil when it had none and takes the source's.
    public var targetDefaultID: UUID? { targetDefault.flatMap { held[$0]?.id } }

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
            case .source: merge.admit(account)
            case .target: merge.keeps(account.record.id) ? account : nil
            }
        }
        if !passed.isEmpty { try await inner.write(passed) }
    }
}
