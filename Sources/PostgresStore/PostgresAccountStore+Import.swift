import AccountStoreCore
import Foundation
import PostgresNIO
import Synchronization

/// A registry copied into this tenant (`blueskyd store copy`), in one transaction: a copy
/// killed at any point (or a database lost during it) leaves the tenant as it was. The tenant
/// must hold no account and no client key: a copy never merges into a registry in use.
/// `store rekey` replaces the tenant's registry with itself sealed under a new key, in the
/// same one transaction.
extension PostgresAccountStore {
    /// Copies `extras` (client keys, nonces) and what `produce` writes into this tenant, sealed
    /// under this store's key and tenant. No host of the tenant may be alive: the tenant is a
    /// target in use, and a host holding another key could open none of the rows (a blind attack
    /// copied into a tenant whose host ran: the host saw nothing, then exited 78 at its next start).
    /// - Parameters:
    ///   - replacing: the tenant's rows are deleted first, in the transaction (which the
    ///     reads of `produce`, on other connections, do not see); otherwise it must hold none.
    ///   - deadline: for the whole transaction (a million accounts take minutes).
    /// - Throws: `.targetNotEmpty` when the tenant holds accounts or client keys (not replacing).
    /// - Returns: the accounts given a new id (old → new): their ids are another tenant's in
    ///   this database.
    @discardableResult
    public func importRegistry(extras: RegistryExtras, replacing: Bool = false, deadline: Duration = .seconds(3600),
                               _ produce: @escaping @Sendable (any RegistryWriter) async throws(StoreError) -> Void)
        async throws(StoreError) -> [UUID: UUID] {
        let (tenant, location) = (settings.tenant, settings.location)
        let renumbered = try await write(replacing ? "resealing accounts" : "copying accounts", deadline: deadline) { [self] session in
            // The tenant's turn (as a default change takes it), then a look at what it holds.
            try await lockDefault(session)
            // No host of the tenant may be alive: one that starts waits for this lock
            // (`verifyKeyAsHost`), one that started before it said so.
            let hosts = try await session.run("""
                SELECT owner FROM blueskyd_host WHERE tenant = \(tenant) AND alive_until > \(unescaped: Self.databaseNow) ORDER BY owner
                """).map { try $0.decode(String.self) }
            guard hosts.isEmpty else { throw StoreError.hostsAlive(hosts) }
            if replacing {
                // Nonces go with their accounts (ON DELETE CASCADE).
                try await session.run("DELETE FROM account WHERE tenant = \(tenant)")
                try await session.run("DELETE FROM oauth_client_key WHERE tenant = \(tenant)")
            }
            let held = try await session.run("""
                SELECT (SELECT count(*) FROM account WHERE tenant = \(tenant)) + (SELECT count(*) FROM oauth_client_key WHERE tenant = \(tenant))
                """).first?.decode(Int.self) ?? 0
            guard held == 0 else { throw StoreError.targetNotEmpty(location: "\(location) (tenant \(tenant))", accounts: held) }
            // The tenant's rows are all this store's key's from now: its hosts write with it.
            let sealer = sealer
            try await session.run("""
                INSERT INTO blueskyd_tenant_key (tenant, fingerprint, since) VALUES (\(tenant), \(sealer.writingFingerprint),
                    \(unescaped: Self.databaseNow))
                ON CONFLICT (tenant) DO UPDATE SET fingerprint = excluded.fingerprint, previous = NULL, since = excluded.since
                """)
            for key in extras.clientKeys {
                guard let sealed = sealer.seal(bytes: key.privateKey, additionalData: StoredClientKey.additionalData(keyID: key.keyID)) else {
                    throw StoreError.database(context: "sealing an OAuth client key", reason: "AES-GCM failed")
                }
                try await session.run("""
                    INSERT INTO oauth_client_key (tenant, key_id, sealed_key, sealed_by, created_at)
                    VALUES (\(tenant), \(key.keyID), \(ByteBuffer(bytes: sealed)), \(sealer.writingFingerprint), \(key.createdAt.storedSeconds))
                    """)
            }
            let writer = ImportWriter(store: self, session: session)
            try await produce(writer)
            let renumbered = writer.renumbered.withLock { $0 }
            let nonces = StoredDPoPNonce.newestPerOrigin(extras.nonces)
            if !nonces.isEmpty {
                let accounts = nonces.map { renumbered[$0.account] ?? $0.account }
                let origins = nonces.map(\.origin)
                let (values, dates) = (nonces.map(\.nonce), nonces.map(\.receivedAt.storedSeconds))
                try await session.run("""
                    INSERT INTO dpop_nonce (account_id, origin, nonce, received_at)
                    SELECT n.account_id, n.origin, n.nonce, n.received_at
                    FROM unnest(\(accounts)::uuid[], \(origins)::text[], \(values)::text[], \(dates)::double precision[])
                        AS n (account_id, origin, nonce, received_at)
                    WHERE EXISTS (SELECT 1 FROM account WHERE tenant = \(tenant) AND id = n.account_id)
                    """)
            }
            return renumbered
        }
        await refreshStatistics()
        return renumbered
    }

    /// Has the database sample the tables again (ANALYZE), after many rows were written at
    /// once. Until autovacuum gets to it (a minute or more), the planner believes the tables
    /// as small as they were, and plans a host's lookups by id as scans of the whole tenant:
    /// a storm of refreshes right after a copy of a million accounts then costs the database
    /// tens of milliseconds a statement. A role that does not own the tables is skipped by the
    /// database with a warning; nothing fails.
    package func refreshStatistics() async {
        do {
            _ = try await read("sampling the tables for the planner") { session in
                try await session.run("ANALYZE account, dpop_nonce, oauth_client_key")
            }
        } catch {
            logger.notice("the database did not sample the tables after a bulk write; autovacuum will",
                          metadata: ["error": "\(error)"])
        }
    }

    /// Inserts a batch of a copy's rows on `session`, every column as the source had it. An
    /// account whose id another tenant of this database holds (a copy between two tenants of one
    /// database: ids are unique in it) is given a new id, sealed under it, and noted in
    /// `renumbered` (old id → new), for its nonces and the report.
    func importRows(_ accounts: [PortableAccount], on session: PostgresSession,
                    renumbered: borrowing Mutex<[UUID: UUID]>) async throws(StoreError) {
        var pending = accounts.map(\.record)
        var secrets = Dictionary(accounts.map { ($0.record.id, $0.secrets) }, uniquingKeysWith: { first, _ in first })
        // Twice at most: a new id is random, and taken again only by a miracle (then refused,
        // so the map only ever holds source ids).
        let sealer = sealer
        for attempt in 0..<2 where !pending.isEmpty {
            var rows: [(AccountRecord, Data)] = []
            rows.reserveCapacity(pending.count)
            for record in pending {
                guard let opened = secrets[record.id] else { continue }
                rows.append((record, try sealer.seal(opened, account: record.id)))
            }
            var taken: [AccountRecord] = []
            for start in stride(from: 0, to: rows.count, by: Self.insertChunk) {
                let chunk = Array(rows[start..<min(start + Self.insertChunk, rows.count)])
                let query = notifying(insertStatement(chunk, sealedWith: sealer, withMark: true), ids: chunk.map(\.0.id))
                do {
                    let inserted = Set(try await session.run(query).map { try $0.decode(UUID.self) })
                    taken += chunk.map(\.0).filter { !inserted.contains($0.id) }
                } catch let error as StoreError {
                    throw error
                } catch {
                    throw StoreError.database(context: "copying accounts", reason: PostgresErrorText.describe(error))
                }
            }
            guard !taken.isEmpty else { return }
            guard attempt == 0 else {
                throw StoreError.database(context: "copying accounts", reason: "\(taken.count) account(s) cannot be written: "
                    + "their id or DID is taken in this database even under a new id")
            }
            pending = taken.map { record in
                var moved = record
                moved.id = UUID()
                secrets[moved.id] = secrets.removeValue(forKey: record.id)
                renumbered.withLock { $0[record.id] = moved.id }
                return moved
            }
        }
    }
}

/// Hands a copy's batches to the transaction, and keeps what it renumbered.
private final class ImportWriter: RegistryWriter {
    let store: PostgresAccountStore
    let session: PostgresSession
    let renumbered = Mutex<[UUID: UUID]>([:])

    init(store: PostgresAccountStore, session: PostgresSession) {
        self.store = store
        self.session = session
    }

    func write(_ accounts: [PortableAccount]) async throws(StoreError) {
        try await store.importRows(accounts, on: session, renumbered: renumbered)
    }
}
