import Foundation

/// What the daemon needs of an account registry, whichever database holds it.
///
/// `AccountStore` keeps it in a SQLite file for one host; `PostgresAccountStore` (module
/// PostgresStore) keeps it in a PostgreSQL database that several hosts share. Both seal secrets
/// alike, both commit durably before returning, and both coordinate refreshes through the same
/// lease: with one host the lease only marks a refresh in flight, with several it also makes
/// sure that one host at a time refreshes an account.
///
/// Every method is synchronous and may block on disk or network: call them from an actor or a
/// background task, never from an event loop.
public protocol AccountStorage: AnyObject, Sendable {
    /// Whether writes succeed; the daemon's status shows an outage.
    var health: StoreHealth { get }
    /// Where the accounts are, for logs and messages: a file path, or a URL without a password.
    var location: String { get }
    /// The name this host's leases carry.
    var leaseOwner: String { get }

    // Accounts
    func insert(contentsOf accounts: [(record: AccountRecord, secrets: AccountSecrets)]) throws
    /// Saves what may change about an account's identity: its handle (and whether it is
    /// verified), its PDS and its OAuth scope; nothing else. Tokens, expiries, state, profile
    /// and the default each have their own write, so that a write made from a stale in-memory
    /// record (another host changed the account meanwhile) cannot roll any of them back.
    /// - Throws: `StoreError.unknownAccount`.
    func saveIdentity(_ record: AccountRecord) throws
    /// Replaces an account's session in place (a new login of a known account), keeping its
    /// id and default flag; returns the new secrets version.
    @discardableResult func replaceSession(_ record: AccountRecord, secrets: AccountSecrets) throws -> Int64
    func setProfile(id: UUID, _ profile: AccountProfile?, at: Date) throws
    func setDefault(id: UUID, at: Date) throws
    func clearDefault(at: Date) throws
    @discardableResult func delete(id: UUID) throws -> AccountRecord

    // Refreshes
    /// Takes the refresh lease of an account whose tokens are still at `version`: the durable
    /// write-ahead mark, made before the refresh request is sent.
    func claimRefresh(id: UUID, expecting version: Int64, at: Date) throws -> RefreshClaim
    /// Stores rotated tokens if the account's tokens are still at `version`, clears the lease
    /// and the mark, and returns the new version.
    /// - Throws: `StoreError.tokensSuperseded` when another host (or a login) stored newer ones.
    func saveRefreshedSession(id: UUID, secrets: AccountSecrets, accessExpiresAt: Date?, refreshExpiresAt: Date?,
                              at: Date, replacing version: Int64) throws -> Int64
    /// Sets an account's state and reason; with `endsRefresh`, also gives this host's lease
    /// back (the refresh's outcome is known; another host's lease stays). With `version` (a
    /// refresh's outcome), only while the tokens are still at it.
    /// - Throws: `StoreError.tokensSuperseded` when they are not: another host (or a login)
    ///   stored newer tokens, and the outcome no longer applies to them.
    func markState(id: UUID, state: AccountState, reason: String?, at: Date, endsRefresh: Bool, ifVersion version: Int64?) throws

    // Reads
    func account(id: UUID) throws -> AccountRecord?
    func account(did: String) throws -> AccountRecord?
    func allAccounts() throws -> [AccountRecord]
    func count() throws -> Int
    func forEachAccount(_ body: (AccountRecord) throws -> Void) throws
    func secrets(for id: UUID) throws -> AccountSecrets
    func verifyKey() throws
    func releaseMemory()

    // OAuth
    func saveDPoPNonces(_ nonces: [StoredDPoPNonce]) throws
    func allDPoPNonces() throws -> [StoredDPoPNonce]
    func addClientKey(_ key: StoredClientKey) throws
    func clientKeys() throws -> [StoredClientKey]
    func removeClientKey(_ keyID: String) throws -> Bool
    func clientKeyIDsInUse() throws -> Set<String>

    /// Calls `handler` for each change another host makes (never for this host's own). A
    /// single-host store never calls it.
    func observeChanges(_ handler: @escaping @Sendable (StoreChange) -> Void)
    func close() throws
}

extension AccountStorage {
    /// Registers one account with its secrets.
    public func insert(_ record: AccountRecord, secrets: AccountSecrets) throws {
        try insert(contentsOf: [(record, secrets)])
    }

    public func setDefault(id: UUID) throws { try setDefault(id: id, at: Date()) }
    public func setProfile(id: UUID, _ profile: AccountProfile?) throws { try setProfile(id: id, profile, at: Date()) }
    public func clearDefault() throws { try clearDefault(at: Date()) }
}

/// The answer to `claimRefresh`.
public enum RefreshClaim: Sendable, Equatable {
    /// The lease is this host's: send the refresh. `interruptedAt` is the mark of an earlier
    /// refresh whose outcome nobody recorded (a crash, or a host that died holding the lease):
    /// the refresh token may already be spent.
    case granted(interruptedAt: Date?)
    /// Another host is refreshing the account; its lease ends at `until` at the latest.
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
