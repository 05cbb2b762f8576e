import AccountStoreCore
import Foundation
import PostgresNIO

/// A registry copied into this tenant (`blueskyd store copy`), in one transaction: a copy
/// killed at any point (or a database lost during it) leaves the tenant as it was. The tenant
/// must hold no account and no client key: a copy never merges into a registry in use.
/// `store rekey` replaces the tenant's registry with itself sealed under a new key, in the
/// same one transaction.
extension PostgresAccountStore {
    /// Copies `extras` (client keys, nonces) and what `produce` writes into this tenant, sealed
    /// under this store's key and tenant. Every row is announced, so a host of the tenant
    /// already running takes the accounts up as they commit.
    /// - Parameters:
    ///   - replacing: the tenant's rows are deleted first, in the transaction (which the
    ///     reads of `produce`, on other connections, do not see); otherwise it must hold none.
    ///   - deadline: for the whole transaction (a million accounts take minutes).
    /// - Throws: `.targetNotEmpty` when the tenant holds accounts or client keys (not replacing).
    public func importRegistry(extras: RegistryExtras, replacing: Bool = false, deadline: Duration = .seconds(3600),
                               _ produce: @escaping @Sendable (any RegistryWriter) async throws(StoreError) -> Void)
        async throws(StoreError) {
        let (tenant, location) = (settings.tenant, settings.location)
        try await write(replacing ? "resealing accounts" : "copying accounts", deadline: deadline) { [self] session in
            // The tenant's turn (as a default change takes it), then a look at what it holds.
            try await lockDefault(session)
            if replacing {
                // No host of the tenant may be alive: one that starts waits for this lock
                // (`verifyKeyAsHost`), one that started before it said so.
                let hosts = try await session.run("""
                    SELECT owner FROM blueskyd_host WHERE tenant = \(tenant) AND alive_until > \(unescaped: Self.databaseNow) ORDER BY owner
                    """).map { try $0.decode(String.self) }
                guard hosts.isEmpty else { throw StoreError.hostsAlive(hosts) }
                // Nonces go with their accounts (ON DELETE CASCADE).
                try await session.run("DELETE FROM account WHERE tenant = \(tenant)")
                try await session.run("DELETE FROM oauth_client_key WHERE tenant = \(tenant)")
            }
            let held = try await session.run("""
                SELECT (SELECT count(*) FROM account WHERE tenant = \(tenant)) + (SELECT count(*) FROM oauth_client_key WHERE tenant = \(tenant))
                """).first?.decode(Int.self) ?? 0
            guard held == 0 else { throw StoreError.targetNotEmpty(location: "\(location) (tenant \(tenant))", accounts: held) }
            for key in extras.clientKeys {
                guard let sealed = sealer.seal(bytes: key.privateKey, additionalData: StoredClientKey.additionalData(keyID: key.keyID)) else {
                    throw StoreError.database(context: "sealing an OAuth client key", reason: "AES-GCM failed")
                }
                try await session.run("""
                    INSERT INTO oauth_client_key (tenant, key_id, sealed_key, created_at)
                    VALUES (\(tenant), \(key.keyID), \(ByteBuffer(bytes: sealed)), \(key.createdAt.storedSeconds))
                    """)
            }
            try await produce(ImportWriter(store: self, session: session))
            let nonces = StoredDPoPNonce.newestPerOrigin(extras.nonces)
            if !nonces.isEmpty {
                let (accounts, origins) = (nonces.map(\.account), nonces.map(\.origin))
                let (values, dates) = (nonces.map(\.nonce), nonces.map(\.receivedAt.storedSeconds))
                try await session.run("""
                    INSERT INTO dpop_nonce (account_id, origin, nonce, received_at)
                    SELECT n.account_id, n.origin, n.nonce, n.received_at
                    FROM unnest(\(accounts)::uuid[], \(origins)::text[], \(values)::text[], \(dates)::double precision[])
                        AS n (account_id, origin, nonce, received_at)
                    WHERE EXISTS (SELECT 1 FROM account WHERE tenant = \(tenant) AND id = n.account_id)
                    """)
            }
        }
    }

    /// Inserts a batch of a copy's rows on `session`, every column as the source had it.
    func importRows(_ accounts: [PortableAccount], on session: PostgresSession) async throws(StoreError) {
        var rows: [(AccountRecord, Data)] = []
        rows.reserveCapacity(accounts.count)
        for account in accounts { rows.append((account.record, try sealer.seal(account.secrets, account: account.record.id))) }
        for start in stride(from: 0, to: rows.count, by: Self.insertChunk) {
            let chunk = Array(rows[start..<min(start + Self.insertChunk, rows.count)])
            let query = notifying(insertStatement(chunk, withMark: true), ids: chunk.map(\.0.id))
            do {
                let inserted = try await session.run(query).count
                // The tenant was empty: an id taken is another tenant's (ids are unique in a database).
                guard inserted == chunk.count else {
                    throw StoreError.database(context: "copying accounts", reason: "\(chunk.count - inserted) account id(s) are "
                        + "another tenant's in this database: a copy between two tenants of one database is not supported")
                }
            } catch let error as StoreError {
                throw error
            } catch {
                throw StoreError.database(context: "copying accounts", reason: PostgresErrorText.describe(error))
            }
        }
    }
}

/// Hands a copy's batches to the transaction.
private struct ImportWriter: RegistryWriter {
    let store: PostgresAccountStore
    let session: PostgresSession
    func write(_ accounts: [PortableAccount]) async throws(StoreError) { try await store.importRows(accounts, on: session) }
}
