import AccountStoreCore
import Foundation
import PostgresNIO

/// `blueskyd store reseal`: the only way a row of this tenant gets a seal it did not get when
/// it was written. Hosts of the tenant may run meanwhile: each row sealed is announced.
extension PostgresAccountStore {
    public func unsealedAccounts() async throws(StoreError) -> [UnsealedAccount] {
        let (tenant, sealer) = (settings.tenant, sealer)
        let query = PostgresQuery(unsafeSQL: "SELECT \(Self.recordColumns), sealed_secrets FROM account "
                                    + "WHERE tenant = $1 ORDER BY created_at, id", binds: Self.binds(tenant))
        return try await read("looking for unsealed accounts") { session in
            var found: [UnsealedAccount] = []
            for row in try await session.run(query) {
                let (parsed, seal, blob) = try Self.sealedParts(row)
                if let unsealed = SealFinding.row(parsed, seal: seal, blob: blob, tenant: tenant, sealer: sealer) {
                    found.append(unsealed)
                }
            }
            return found
        }
    }

    public func sealAccounts(_ ids: [UUID], at: Date) async throws(StoreError) -> [UUID] {
        let (tenant, sealer, altered) = (settings.tenant, sealer, StoreError.recordAlteredReason)
        return try await write("sealing accounts") { [self] session in
            var sealed: [UUID] = []
            for id in ids {
                let query = PostgresQuery(unsafeSQL: "SELECT \(Self.recordColumns), sealed_secrets FROM account "
                                            + "WHERE tenant = $1 AND id = $2 FOR UPDATE", binds: Self.binds(tenant, id))
                guard let row = try await session.run(query).first else { continue }
                // A row read whole only: an unreadable one's stand-in is never sealed.
                let (parsed, seal, blob) = try Self.sealedParts(row)
                guard case .readable(let record) = parsed,
                      SealFinding.of(record, seal: seal, blob: blob, tenant: tenant, sealer: sealer)?.mayBeSealedAgain == true else {
                    continue
                }
                let newSeal = ByteBuffer(bytes: sealer.metadataSeal(record, tenant: tenant))
                // The secrets written again in this version's format: they now say the row had a
                // seal, so a seal removed later is never taken for one never written.
                let secrets = ByteBuffer(bytes: try sealer.seal(try sealer.open(blob, account: id), account: id))
                // Read as altered for want of a seal only: it may work again.
                try await session.run(notifying("""
                    UPDATE account SET metadata_seal = \(newSeal), sealed_secrets = \(secrets), updated_at = \(at.storedSeconds),
                        sealed_by = \(sealer.writingFingerprint), metadata_sealed_by = \(sealer.writingFingerprint),
                        state = CASE WHEN state_reason = \(altered) THEN 'active' ELSE state END,
                        state_reason = CASE WHEN state_reason = \(altered) THEN NULL ELSE state_reason END
                    WHERE tenant = \(tenant) AND id = \(id)
                    """, ids: [id]))
                sealed.append(id)
            }
            return sealed
        }
    }

    /// The record of a row selected with `recordColumns` and `sealed_secrets`, its seal and blob.
    static func sealedParts(_ row: PostgresRow) throws -> (ParsedRow, Data?, Data) {
        let record = try Self.parsed(row)
        let columns = row.makeRandomAccess()
        let seal = try columns["metadata_seal"].decode(ByteBuffer?.self).map { Data(buffer: $0) }
        let blob = Data(buffer: try columns["sealed_secrets"].decode(ByteBuffer.self))
        return (record, seal, blob)
    }
}
