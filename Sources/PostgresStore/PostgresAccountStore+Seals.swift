import AccountStoreCore
import Foundation
import PostgresNIO

/// Writes of the columns a seal covers (the default flag, the handle): each locks and reads the
/// row as it is inside the transaction, and seals what it writes only over a seal that held. A
/// row someone changed without the key is never sealed by a write that merely touched it.
extension PostgresAccountStore {
    /// The tenant's row of `id` as it is now, locked until the transaction ends and checked
    /// against its seal; nil when there is none.
    func lockedRecord(_ session: PostgresSession, id: UUID) async throws -> AccountRecord? {
        try await session.run(PostgresQuery(
            unsafeSQL: "SELECT \(Self.recordColumns) FROM account WHERE tenant = $1 AND id = $2 FOR UPDATE",
            binds: Self.binds(settings.tenant, id))).first.map(verified)
    }

    /// Clears the tenant's default (but `id`'s). A cleared row whose seal held is sealed without
    /// the flag; one whose seal failed keeps failing. Default changes of one tenant take turns
    /// under a transaction-scoped lock: a unique index is checked row by row, so two hosts each
    /// clearing then setting a different default would otherwise collide on
    /// `account_single_default` instead of the later one simply winning.
    func clearDefault(_ session: PostgresSession, except id: UUID?, at: Date) async throws {
        try await lockDefault(session)
        let rows = try await session.run(PostgresQuery(
            unsafeSQL: "SELECT \(Self.recordColumns) FROM account WHERE tenant = $1 AND is_default "
                + "AND id IS DISTINCT FROM $2 ORDER BY id FOR UPDATE",
            binds: Self.binds(settings.tenant, id)))
        for row in rows {
            var record = try verified(row)
            let resealed = record.sealCheck == .holds
            record.isDefault = false
            let newSeal = resealed ? seal(record) : nil
            try await session.run(notifying("""
                UPDATE account SET is_default = false, metadata_seal = COALESCE(\(newSeal?.bytes), metadata_seal),
                    metadata_sealed_by = COALESCE(\(newSeal?.by), metadata_sealed_by),
                    updated_at = \(at.storedSeconds)
                WHERE tenant = \(settings.tenant) AND id = \(record.id)
                """, ids: [record.id]))
        }
    }

    /// Makes `id` the default, sealed with the flag; refused for a row whose seal fails.
    func makeDefault(_ session: PostgresSession, id: UUID, at: Date) async throws {
        // The turn first, then rows: a host holding the turn locks the default rows next.
        try await lockDefault(session)
        guard var record = try await lockedRecord(session, id: id) else { throw StoreError.unknownAccount(id) }
        guard record.sealCheck == .holds else { throw StoreError.recordAltered(account: id) }
        try await clearDefault(session, except: id, at: at)
        guard !record.isDefault else { return }
        record.isDefault = true
        let sealed = seal(record)
        try await session.run(notifying("""
            UPDATE account SET is_default = true, metadata_seal = \(sealed.bytes), metadata_sealed_by = \(sealed.by),
                updated_at = \(at.storedSeconds)
            WHERE tenant = \(settings.tenant) AND id = \(id)
            """, ids: [id]))
    }

    /// The seal of a new session's `record` over the row's own default flag (a login never
    /// decides it): kept when the row's seal held, else cleared (a new login mends the row, not
    /// a default someone else set). Returns the flag with the seal.
    func sessionSeal(_ session: PostgresSession, for record: AccountRecord) async throws -> (isDefault: Bool, seal: Sealed) {
        guard let stored = try await lockedRecord(session, id: record.id) else { throw StoreError.unknownAccount(record.id) }
        var sealed = record
        sealed.isDefault = stored.sealCheck == .holds && stored.isDefault
        return (sealed.isDefault, seal(sealed))
    }

    /// The seal of the row after a refresh renamed it (the new handle not yet verified), or nil
    /// when the tokens moved past `version`; refused for a row whose seal fails.
    func renamedSeal(_ session: PostgresSession, id: UUID, handle: String, version: Int64) async throws -> Sealed? {
        guard var record = try await lockedRecord(session, id: id), record.secretsVersion == version else { return nil }
        guard record.sealCheck == .holds else { throw StoreError.recordAltered(account: id) }
        record.handle = handle
        record.handleVerified = false
        return seal(record)
    }
}

extension PostgresAccountStore {
    /// The tenant's turn at changing its default, held until the transaction ends: its own row
    /// of `blueskyd_tenant_lock`, which row-level security hides from every other tenant (an
    /// advisory lock, any role could take and hold).
    func lockDefault(_ session: PostgresSession) async throws {
        let tenant = settings.tenant
        try await session.run("INSERT INTO blueskyd_tenant_lock (tenant) VALUES (\(tenant)) ON CONFLICT DO NOTHING")
        try await session.run("SELECT 1 FROM blueskyd_tenant_lock WHERE tenant = \(tenant) FOR UPDATE")
    }
}
