import Foundation

/// One account as it moves to another store (`blueskyd store copy`): its row as blueskyd reads
/// it, whose seal held, and its secrets opened. The target seals both again under its own key
/// and tenant, so a copy from SQLite (no tenant) to a PostgreSQL tenant, or to a store with
/// another key, keeps every session.
///
/// Everything the session needs goes with it: the tokens and DPoP key (and an OAuth 2.0
/// server's client registration, which lives in the secrets), the version of its tokens, the
/// write-ahead mark of a refresh left unfinished, the default flag and the profile cache. What
/// is the source's alone stays behind: its lease (no host of the source runs while it copies).
public struct PortableAccount: Sendable, Equatable {
    public var record: AccountRecord
    public var secrets: AccountSecrets

    public init(record: AccountRecord, secrets: AccountSecrets) {
        self.record = record
        self.secrets = secrets
    }
}

/// Where a copy writes, a batch of accounts at a time, inside one step the target makes whole
/// or not at all (`importRegistry`).
public protocol RegistryWriter: Sendable {
    func write(_ accounts: [PortableAccount]) async throws(StoreError)
}

/// What a store holds besides its accounts, copied with them.
public struct RegistryExtras: Sendable, Equatable {
    /// OAuth client signing keys (a confidential client's), opened.
    public var clientKeys: [StoredClientKey]
    /// The latest DPoP nonce per account and origin.
    public var nonces: [StoredDPoPNonce]

    public init(clientKeys: [StoredClientKey], nonces: [StoredDPoPNonce]) {
        self.clientKeys = clientKeys
        self.nonces = nonces
    }
}

extension AccountStore {
    /// `portableAccounts` an account at a time, for a store without a page read of its own.
    public func portableAccountsOneByOne(after key: AccountPageKey?, limit: Int) async throws(StoreError) -> [PortableAccount] {
        var page: [PortableAccount] = []
        for record in try await accounts(after: key, limit: limit) {
            guard !record.isAltered else { throw StoreError.recordAltered(account: record.id) }
            page.append(PortableAccount(record: record, secrets: try await secrets(for: record.id)))
        }
        return page
    }

    /// The client keys and nonces a copy takes along.
    public func registryExtras() async throws(StoreError) -> RegistryExtras {
        RegistryExtras(clientKeys: try await clientKeys(), nonces: try await allDPoPNonces())
    }
}
