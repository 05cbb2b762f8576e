import Foundation

/// What the daemon needs of an account registry, whichever database holds it.
///
/// `SQLiteAccountStore` keeps it in a SQLite file for one host; `PostgresAccountStore` in a
/// PostgreSQL database that several hosts share; `MemoryAccountStore` in memory, for tests. All
/// seal secrets alike, all commit durably before returning, and all coordinate refreshes through
/// the same lease: with one host the lease only marks a refresh in flight, with several it also
/// makes sure that one host at a time refreshes an account.
///
/// Every method is async and suspends its caller instead of blocking a thread: SQLite's work
/// runs on GRDB's own queues, PostgreSQL's on NIO's event loops. Every method that reaches a
/// database has a deadline: a database that stops answering fails the call, never holds it.
public protocol AccountStore: AnyObject, Sendable {
    /// Whether writes succeed; the daemon's status shows an outage.
    var health: StoreHealth { get }
    /// Where the accounts are, for logs and messages: a file path, or a URL without a password.
    var location: String { get }
    /// This process's name in refresh leases: unique to this start of this process, so that two
    /// hosts configured alike never take each other's leases for their own.
    var leaseOwner: String { get }
    /// How long a refresh lease holds when several hosts share the store (a request must never
    /// be out longer); nil for a store only this host writes, where the lease only marks.
    var sharedLease: Duration? { get }

    // MARK: Accounts

    /// Registers accounts in one transaction (all or nothing).
    /// - Throws: `.duplicateDID` for the first DID already registered (or repeated in the batch).
    func insert(contentsOf accounts: [(record: AccountRecord, secrets: AccountSecrets)]) async throws(StoreError)
    /// Saves what may change about an account's identity: its handle (and whether it is
    /// verified) and its PDS; nothing else. Tokens, expiries, state, profile, scope and the
    /// default each have their own write, so that a write made from a stale in-memory record
    /// (another host changed the account meanwhile) cannot roll any of them back; the row's
    /// metadata seal is made again from the row as it is then.
    /// - Throws: `.unknownAccount`, `.recordAltered` (the row's seal already failed: it is not
    ///   sealed again).
    func saveIdentity(_ record: AccountRecord) async throws(StoreError)
    /// Replaces an account's session in place (a new login of a known account), keeping its
    /// id, creation date, default flag and profile; returns the new secrets version.
    func replaceSession(_ record: AccountRecord, secrets: AccountSecrets) async throws(StoreError) -> Int64
    func setProfile(id: UUID, _ profile: AccountProfile?, at: Date) async throws(StoreError)
    /// Makes this account the default and every other one not, in one transaction.
    func setDefault(id: UUID, at: Date) async throws(StoreError)
    func clearDefault(at: Date) async throws(StoreError)
    /// Removes an account and its secrets, returning what was removed. Deleting the default
    /// account leaves no default: picking another silently could send calls as someone else.
    @discardableResult func delete(id: UUID) async throws(StoreError) -> AccountRecord

    // MARK: Refreshes

    /// Takes the refresh lease of an account whose tokens are still at `version`: the durable
    /// write-ahead mark, made before the refresh request is sent.
    func claimRefresh(id: UUID, expecting version: Int64, at: Date) async throws(StoreError) -> RefreshClaim
    /// Stores rotated tokens if the account's tokens are still at `version`, clears the lease
    /// and the mark, and returns the new version. What the refresh's answer changed besides
    /// the tokens goes in the same write: a narrowed `scope`, and a new (as yet unverified)
    /// `handle` (nil: unchanged).
    /// - Throws: `.tokensSuperseded` when another host (or a login) stored newer ones.
    func saveRefreshedSession(id: UUID, secrets: AccountSecrets, accessExpiresAt: Date?, refreshExpiresAt: Date?,
                              scope: String?, handle: String?, at: Date, replacing version: Int64) async throws(StoreError) -> Int64
    /// Sets an account's state and reason. `lease` says what becomes of this host's lease: a
    /// refresh whose outcome is known gives it back with its mark (`.release`); one whose
    /// answer was lost gives the lease back but keeps the mark, so that whichever host
    /// refreshes next knows the token may be spent (`.releaseKeepingMark`); other changes
    /// leave both (`.keep`). With `version` (a refresh's outcome), only while the tokens are
    /// still at it.
    /// - Throws: `.tokensSuperseded` when they are not: another host (or a login) stored newer
    ///   tokens, and the outcome no longer applies to them.
    func markState(id: UUID, state: AccountState, reason: String?, at: Date, lease: LeaseRelease,
                   ifVersion version: Int64?) async throws(StoreError)

    // MARK: Reads

    func account(id: UUID) async throws(StoreError) -> AccountRecord?
    /// Those of the accounts `ids` that exist, in no given order: how a host reads many
    /// accounts other hosts changed at once (a shared store makes one query of it).
    func accounts(ids: [UUID]) async throws(StoreError) -> [AccountRecord]
    func account(did: String) async throws(StoreError) -> AccountRecord?
    /// Up to `limit` accounts after `key` (nil: from the first), oldest first: a daemon
    /// reading a million accounts never holds every row at once.
    func accounts(after key: AccountPageKey?, limit: Int) async throws(StoreError) -> [AccountRecord]
    /// Calls `body` with every account once, in the order this store reads fastest, each page
    /// read while `body` works through the one before (`AccountPages`): a start's loading.
    /// The default reads oldest first; SQLite reads its rows as they lie in the file.
    func forEachAccountAsStored(pageSize: Int, _ body: (AccountRecord) async throws -> Void) async throws
    func count() async throws(StoreError) -> Int
    /// Opens the sealed secrets of one account.
    /// - Throws: `.unknownAccount`, `.secretDoesNotOpen` (wrong key, tampering), or
    ///   `.recordAltered` (the account's row was changed by someone without the store key).
    func secrets(for id: UUID) async throws(StoreError) -> AccountSecrets
    /// Up to `limit` accounts after `key`, oldest first, each with its secrets opened, read a
    /// page at a time (a copy of a million accounts makes a query per page, not per account).
    /// - Throws: `.recordAltered` for a row whose seal does not hold (a copy would bless it
    ///   under the target's key), `.secretDoesNotOpen` for one whose secrets do not open.
    func portableAccounts(after key: AccountPageKey?, limit: Int) async throws(StoreError) -> [PortableAccount]
    /// Checks that the store key opens what the store holds (one account's secrets and every
    /// client key): a replaced key is found at start, not at the first refresh.
    func verifyKey() async throws(StoreError)
    /// The rows whose metadata seal does not hold, as stored (what `blueskyd store reseal` shows).
    func unsealedAccounts() async throws(StoreError) -> [UnsealedAccount]
    /// Seals the rows `ids` names, each only if it was never sealed and its secrets open under
    /// the key (`UnsealedAccount.mayBeSealed`, checked again under the write); an account that
    /// needed a login only for want of a seal is active again. Returns the ids sealed.
    func sealAccounts(_ ids: [UUID], at: Date) async throws(StoreError) -> [UUID]
    /// Hands back memory the database connections cache, after a large read.
    func releaseMemory() async

    // MARK: OAuth

    /// Saves the latest nonces (insert or replace per account and origin); nonces of accounts
    /// deleted meanwhile are skipped.
    func saveDPoPNonces(_ nonces: [StoredDPoPNonce]) async throws(StoreError)
    func allDPoPNonces() async throws(StoreError) -> [StoredDPoPNonce]
    func addClientKey(_ key: StoredClientKey) async throws(StoreError)
    /// Every client signing key, oldest first.
    func clientKeys() async throws(StoreError) -> [StoredClientKey]
    /// Removes a client key no session uses any more; false when one still does (or it is unknown).
    func removeClientKey(_ keyID: String) async throws(StoreError) -> Bool
    func clientKeyIDsInUse() async throws(StoreError) -> Set<String>

    // MARK: Other hosts

    /// Calls `handler` for each change another host makes (never for this host's own). A
    /// single-host store never calls it. `keeping` names the accounts whose rotated tokens this
    /// host holds unsaved: a shared store keeps their leases while the host lives, and gives
    /// back every other lease of this host's that ran out (one whose release was never
    /// recorded), so that no account stays held by a host that no longer refreshes it.
    func observeChanges(keeping: @escaping @Sendable () -> Set<UUID>, _ handler: @escaping @Sendable (StoreChange) -> Void) async
    /// Closes the connections; further calls fail with `.unreachable`.
    func close() async
}

extension AccountStore {
    /// One read per account: for stores whose reads cost no round trip (a file, memory).
    public func accounts(ids: [UUID]) async throws(StoreError) -> [AccountRecord] {
        var found: [AccountRecord] = []
        for id in ids {
            if let record = try await account(id: id) { found.append(record) }
        }
        return found
    }

    /// Hears the other hosts' changes; this host keeps no lease beyond its refreshes.
    public func observeChanges(_ handler: @escaping @Sendable (StoreChange) -> Void) async {
        await observeChanges(keeping: { [] }, handler)
    }

    /// Registers one account with its secrets.
    public func insert(_ record: AccountRecord, secrets: AccountSecrets) async throws(StoreError) {
        try await insert(contentsOf: [(record, secrets)])
    }

    /// Calls `body` with every account, oldest first, a page at a time.
    public func forEachAccount(pageSize: Int = 10_000,
                               _ body: (AccountRecord) async throws -> Void) async throws {
        var after: AccountPageKey?
        while true {
            let page = try await accounts(after: after, limit: pageSize)
            for record in page { try await body(record) }
            guard page.count == pageSize, let last = page.last else { return }
            after = AccountPageKey(last)
        }
    }

    public func forEachAccountAsStored(pageSize: Int, _ body: (AccountRecord) async throws -> Void) async throws {
        try await AccountPages.forEach(from: nil as AccountPageKey?, { [self] after in
            let page = try await accounts(after: after, limit: pageSize)
            return (page, page.count == pageSize ? page.last.map(AccountPageKey.init) : nil)
        }, body)
    }

    /// Every account, oldest first (tests and small tools; the daemon pages).
    public func allAccounts() async throws(StoreError) -> [AccountRecord] {
        var all: [AccountRecord] = []
        do {
            try await forEachAccount { all.append($0) }
        } catch {
            // Only the store throws here: the body cannot.
            throw error as? StoreError ?? .database(context: "listing the accounts", reason: "\(error)")
        }
        return all
    }
}

/// Where a page of accounts starts: after this creation date and id (the listing's order).
public struct AccountPageKey: Sendable, Equatable {
    public var createdAt: Date
    public var id: UUID

    public init(createdAt: Date, id: UUID) {
        self.createdAt = createdAt
        self.id = id
    }

    public init(_ record: AccountRecord) {
        self.init(createdAt: record.createdAt, id: record.id)
    }

    /// Whether `record` comes after this key in the listing's order.
    public func precedes(_ record: AccountRecord) -> Bool {
        (createdAt, id.uuidString) < (record.createdAt, record.id.uuidString)
    }
}

/// What a state change does to this host's refresh lease and the write-ahead mark.
public enum LeaseRelease: Sendable, Equatable {
    /// Neither changes (a change that is no refresh's outcome).
    case keep
    /// The refresh's outcome is known: the lease is given back and the mark cleared.
    case release
    /// The refresh's answer was lost (the token may be spent): the lease is given back so that
    /// any host may try again, and the mark stays to say so.
    case releaseKeepingMark
}

/// The answer to `claimRefresh`.
public enum RefreshClaim: Sendable, Equatable {
    /// The lease is this host's for `sharedLease` from the claim (the store's clock): send the
    /// refresh, if its deadline fits in that.
    /// `interruptedAt` is the mark of an earlier refresh whose outcome nobody recorded (a
    /// crash, or a host that died holding the lease): the refresh token may already be spent.
    case granted(interruptedAt: Date?)
    /// Another host is refreshing the account (or holds its rotated tokens); look again at
    /// `until` at the latest.
    case held(by: String, until: Date)
    /// The tokens are no longer the ones expected: another host refreshed them, or a login
    /// replaced them. Read the account again; nothing needs sending.
    case superseded(version: Int64)
}

/// A change another host made to the shared store.
public enum StoreChange: Sendable, Hashable {
    /// This account was added, changed or removed.
    case account(UUID)
    /// Changes may have been missed (the connection that hears them was lost): read everything.
    case everything
}
