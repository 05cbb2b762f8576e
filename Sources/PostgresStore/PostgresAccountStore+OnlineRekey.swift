import AccountStoreCore
import Foundation
import PostgresNIO

/// The pass of a rekey while hosts run (docs/design/rekey.md): the rows still sealed under
/// another key than the tenant's writing one are sealed again under it, a batch per transaction.
///
/// A row a host is refreshing is locked by it: the batch skips it (`SKIP LOCKED`) rather than
/// waits, and a later sweep takes it, or finds it already under the writing key (the host's save
/// was). Nothing else of a row changes: not its version (a host's save over the version it read
/// still lands), not its dates, and nobody is told (the secrets are the same).
extension PostgresAccountStore {
    /// What one batch found.
    public struct ResealBatch: Sendable {
        /// Rows sealed again under the writing key.
        public var resealed = 0
        /// Rows under another key that no key of this store opens: left as they are.
        public var unopened: [UUID] = []
        /// Rows whose metadata seal does not hold (someone without the key changed the row, or
        /// the row cannot be read whole): their secrets are resealed, their seal left as it is,
        /// broken under every key and still naming the key it was made under.
        public var altered: [UUID] = []
        /// The last id the batch read (the next batch starts after it); nil when it read none.
        public var last: UUID?
    }

    /// Reseals up to `limit` of the tenant's rows after `after` (by id) that name another key
    /// than this store's writing key, leaving out `skipping` (rows no key opens, or altered, found before).
    public func resealBatch(after: UUID?, limit: Int = 500, skipping: [UUID]) async throws(StoreError) -> ResealBatch {
        let (tenant, sealer) = (settings.tenant, sealer)
        let writing = sealer.writingFingerprint
        let start = after ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        return try await write("resealing accounts under the new key") { session in
            let rows = try await session.run(PostgresQuery(unsafeSQL: """
                SELECT \(Self.recordColumns), sealed_secrets FROM account
                WHERE tenant = $1 AND id > $2 AND NOT id = ANY($3)
                    AND (sealed_by IS DISTINCT FROM $4 OR (metadata_seal IS NOT NULL AND metadata_sealed_by IS DISTINCT FROM $4))
                ORDER BY id LIMIT \(limit) FOR UPDATE SKIP LOCKED
                """, binds: Self.binds(tenant, start, skipping, writing)))
            var batch = ResealBatch()
            var (ids, secrets, seals, sealIDs): ([UUID], [ByteBuffer], [ByteBuffer], [UUID]) = ([], [], [], [])
            for row in rows {
                let (parsed, seal, blob) = try Self.sealedParts(row)
                let id = parsed.record.id
                batch.last = id
                guard let resealed = sealer.resealed(blob, account: id) else {
                    batch.unopened.append(id)
                    continue
                }
                ids.append(id)
                secrets.append(ByteBuffer(bytes: resealed))
                // Only a seal that holds is made again: a broken one stays as it is, and is listed.
                guard let seal else { continue }
                guard case .readable(let record) = parsed,
                      let newSeal = sealer.resealedMetadataSeal(seal, record: record, tenant: tenant) else {
                    batch.altered.append(id)
                    continue
                }
                sealIDs.append(id)
                seals.append(ByteBuffer(bytes: newSeal))
            }
            guard !ids.isEmpty else { return batch }
            try await session.run("""
                UPDATE account SET sealed_secrets = r.secrets, sealed_by = \(writing)
                FROM unnest(\(ids)::uuid[], \(secrets)::bytea[]) AS r (id, secrets)
                WHERE account.tenant = \(tenant) AND account.id = r.id
                """)
            if !sealIDs.isEmpty {
                try await session.run("""
                    UPDATE account SET metadata_seal = r.seal, metadata_sealed_by = \(writing)
                    FROM unnest(\(sealIDs)::uuid[], \(seals)::bytea[]) AS r (id, seal)
                    WHERE account.tenant = \(tenant) AND account.id = r.id
                    """)
            }
            batch.resealed = ids.count
            return batch
        }
    }

    /// Reseals the tenant's OAuth client keys under the writing key; returns those no key opens.
    public func resealClientKeys() async throws(StoreError) -> [String] {
        let (tenant, sealer) = (settings.tenant, sealer)
        let writing = sealer.writingFingerprint
        return try await write("resealing OAuth client keys under the new key") { session in
            var unopened: [String] = []
            let rows = try await session.run("""
                SELECT key_id, sealed_key FROM oauth_client_key WHERE tenant = \(tenant) AND sealed_by IS DISTINCT FROM \(writing)
                ORDER BY key_id FOR UPDATE
                """).map { try $0.decode((String, ByteBuffer).self) }
            for (keyID, sealed) in rows {
                let additionalData = StoredClientKey.additionalData(keyID: keyID)
                guard let key = sealer.open(bytes: Data(buffer: sealed), additionalData: additionalData),
                      let resealed = sealer.seal(bytes: key, additionalData: additionalData) else {
                    unopened.append(keyID)
                    continue
                }
                try await session.run("""
                    UPDATE oauth_client_key SET sealed_key = \(ByteBuffer(bytes: resealed)), sealed_by = \(writing)
                    WHERE tenant = \(tenant) AND key_id = \(keyID)
                    """)
            }
            return unopened
        }
    }

    /// How many of the tenant's rows (accounts and client keys) name another key than `fingerprint`
    /// (by default the writing one), but the accounts and client keys `excluding` names (those a
    /// pass found it cannot reseal).
    public func rowsUnderOtherKeys(than fingerprint: String? = nil, excluding accounts: [UUID] = [],
                                   clientKeys: [String] = []) async throws(StoreError) -> Int {
        let (tenant, writing) = (settings.tenant, fingerprint ?? sealer.writingFingerprint)
        return try await read("counting rows under the old key") { session in
            try await session.run("""
                SELECT (SELECT count(*) FROM account WHERE tenant = \(tenant) AND NOT id = ANY(\(accounts))
                        AND (sealed_by IS DISTINCT FROM \(writing)
                            OR (metadata_seal IS NOT NULL AND metadata_sealed_by IS DISTINCT FROM \(writing))))
                    + (SELECT count(*) FROM oauth_client_key WHERE tenant = \(tenant) AND NOT key_id = ANY(\(clientKeys))
                        AND sealed_by IS DISTINCT FROM \(writing))
                """).first?.decode(Int.self) ?? 0
        }
    }
}
