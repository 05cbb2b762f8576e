import AccountStoreCore
import Foundation
import GRDB

/// `blueskyd store reseal`: the only way a row gets a seal it did not get when it was written.
extension SQLiteAccountStore {
    public func unsealedAccounts() async throws(StoreError) -> [UnsealedAccount] {
        let sealer = sealer
        return try await performRead("looking for unsealed accounts") { db in
            let request = AccountRecord.order(AccountColumn.createdAt, AccountColumn.id)
                .select(AccountRecord.databaseSelection + [AccountColumn.sealedSecrets, AccountColumn.metadataSeal])
            var found: [UnsealedAccount] = []
            let rows = try Row.fetchCursor(db, request)
            var layout: AccountRowLayout?
            while let row = try rows.next() {
                if let unsealed = SealFinding.row(try Self.parsed(row, layout: .of(row, cached: &layout)), seal: row[AccountColumn.metadataSeal],
                                                  blob: row[AccountColumn.sealedSecrets], tenant: Self.tenant, sealer: sealer) {
                    found.append(unsealed)
                }
            }
            return found
        }
    }

    public func sealAccounts(_ ids: [UUID], at: Date) async throws(StoreError) -> [UUID] {
        let sealer = sealer
        return try await performWrite("sealing accounts") { db in
            var sealed: [UUID] = []
            for id in ids {
                let request = AccountRecord.filter(key: id)
                    .select(AccountRecord.databaseSelection + [AccountColumn.sealedSecrets, AccountColumn.metadataSeal])
                guard let row = try Row.fetchOne(db, request) else { continue }
                // A row read whole only: an unreadable one's stand-in is never sealed.
                guard case .readable(let record) = try Self.parsed(row) else { continue }
                let blob: Data = row[AccountColumn.sealedSecrets]
                guard SealFinding.of(record, seal: row[AccountColumn.metadataSeal], blob: blob, tenant: Self.tenant,
                                     sealer: sealer)?.mayBeSealedAgain == true else { continue }
                // The secrets written again in this version's format: they now say the row had a
                // seal, so a seal removed later is never taken for one never written.
                let secrets = try sealer.open(blob, account: id)
                try db.execute(sql: "UPDATE account SET metadata_seal = ?, sealed_secrets = ?, updated_at = ? WHERE id = ?",
                               arguments: [sealer.metadataSeal(record, tenant: Self.tenant),
                                           try sealer.seal(secrets, account: id), at.storedSeconds, id])
                // Read as altered for want of a seal only: it may work again.
                try db.execute(sql: "UPDATE account SET state = ?, state_reason = NULL WHERE id = ? AND state_reason = ?",
                               arguments: [AccountState.active.rawValue, id, StoreError.recordAlteredReason])
                sealed.append(id)
            }
            return sealed
        }
    }
}
