import AccountStoreCore
import Foundation
import NIOCore
import PostgresNIO

/// The two statements every refresh sends, its claim and its save, prepared once per
/// connection (postgres-nio keeps them by name, per connection): PostgreSQL parses and plans
/// each once per connection instead of once per refresh, and after five runs keeps one plan
/// for all (a lookup by the primary key whatever the values). Every other statement is sent
/// unnamed and parsed and planned each time; those of a storm are batches, which spread that
/// over their rows.
///
/// The claim's rules are `RefreshClaim.decide`'s and `requireSavable`'s, written in SQL for the
/// cases where it grants without a read (`claimRefreshAlone`): the two must change together.
struct ClaimAloneStatement: PostgresPreparedStatement {
    static let sql = """
        UPDATE account a SET refresh_started_at = $1, lease_owner = $2,
            lease_expires_at = \(PostgresAccountStore.databaseNow) + $3, updated_at = $1
        FROM (SELECT id, refresh_started_at FROM account
              WHERE tenant = $4 AND id = $5 AND (lease_owner IS NULL OR lease_owner = $2) FOR UPDATE) before
        WHERE a.tenant = $4 AND a.id = before.id AND a.secrets_version = $6
            AND (a.lease_owner IS NULL OR a.lease_owner = $2)
            AND NOT EXISTS (SELECT 1 FROM blueskyd_tenant_key k WHERE k.tenant = $4 AND k.fingerprint <> $7)
        RETURNING before.refresh_started_at
        """
    static let bindingDataTypes: [PostgresDataType] = [.float8, .text, .float8, .text, .uuid, .int8, .text]
    /// The mark of an interrupted refresh as it was just before this grant.
    typealias Row = Double?

    var now: Double
    var owner: String
    var lease: Double
    var tenant: String
    var id: UUID
    var version: Int64
    var writingKey: String

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 7)
        bindings.append(now)
        bindings.append(owner)
        bindings.append(lease)
        bindings.append(tenant)
        bindings.append(id)
        bindings.append(version)
        bindings.append(writingKey)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Double?.self) }
}

/// The save of rotated tokens over the version they were refreshed from, announced to the
/// other hosts on the one channel of a host that holds one key. A host holding two (a rekey
/// while hosts run) sends the same `update` through `notifying`, unprepared.
struct SaveRefreshedStatement: PostgresPreparedStatement {
    /// The update itself, parameters $1 to $13 (`updateBindings`).
    static let update = """
        UPDATE account SET
            sealed_secrets = $1, sealed_by = $2, secrets_version = secrets_version + 1,
            access_expires_at = $3, refresh_expires_at = $4, last_refresh_at = $5,
            refresh_started_at = NULL, lease_owner = NULL, lease_expires_at = NULL,
            state = $6, state_reason = NULL, updated_at = $5, oauth_scope = COALESCE($7, oauth_scope),
            handle_verified = handle_verified AND $8::text IS NULL, handle = COALESCE($8, handle),
            metadata_seal = COALESCE($9, metadata_seal), metadata_sealed_by = COALESCE($10, metadata_sealed_by)
        WHERE tenant = $11 AND id = $12 AND secrets_version = $13
        """
    /// What `notifying` makes of `update` for one channel.
    static let sql = PostgresAccountStore.announcedOnOneChannel(update, returning: "secrets_version, id", channel: 14)
    static let bindingDataTypes: [PostgresDataType] = [
        .bytea, .text, .float8, .float8, .float8, .text, .text, .text, .bytea, .text, .text, .uuid, .int8,
        .text, .uuidArray, .textArray,
    ]
    /// The tokens' new version.
    typealias Row = Int64

    var sealed: PostgresAccountStore.Sealed
    var accessExpiresAt: Double?
    var refreshExpiresAt: Double?
    var at: Double
    var scope: String?
    /// A new handle, and the metadata seal over the row renamed to it.
    var handle: String?
    var renamed: PostgresAccountStore.Sealed?
    var tenant: String
    var id: UUID
    var version: Int64
    /// The channel and the payload of the announcement.
    var channel = ""
    var payload = ""

    func updateBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 16)
        bindings.append(sealed.bytes)
        bindings.append(sealed.by)
        bindings.append(accessExpiresAt)
        bindings.append(refreshExpiresAt)
        bindings.append(at)
        bindings.append(AccountState.active.rawValue)
        bindings.append(scope)
        bindings.append(handle)
        bindings.append(renamed?.bytes)
        bindings.append(renamed?.by)
        bindings.append(tenant)
        bindings.append(id)
        bindings.append(version)
        return bindings
    }

    func makeBindings() -> PostgresBindings {
        var bindings = updateBindings()
        bindings.append(channel)
        bindings.append([id])
        bindings.append([payload])
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row {
        // pg_notify's column (void) follows the two asked for.
        try row.makeRandomAccess()[0].decode(Int64.self)
    }
}
