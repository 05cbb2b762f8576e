import AccountStoreCore
import Foundation
import PostgresNIO

extension PostgresAccountStore {
    /// The metadata columns, in `AccountRecord` order; never the sealed secrets.
    static let recordColumns = """
        id, did, handle, handle_verified, pds, auth_kind, state, state_reason, is_default, created_at, updated_at,
        last_refresh_at, access_expires_at, refresh_expires_at, refresh_started_at, oauth_issuer, oauth_token_endpoint,
        oauth_revocation_endpoint, oauth_scope, oauth_session_started_at, oauth_client_kind, oauth_client_id,
        oauth_client_key_id, profile_display_name, profile_avatar, profile_description, profile_fetched_at, secrets_version,
        metadata_seal, metadata_sealed_by, sealed_by
        """

    /// The row read whole, or a tampered stand-in keeping the columns that locate it
    /// (`UnreadableRow`).
    static func parsed(_ row: PostgresRow) throws -> ParsedRow {
        let cells = row.makeRandomAccess()
        return try ParsedRow.parse(
            id: try cells["id"].decode(UUID.self), did: try cells["did"].decode(String.self),
            handle: try cells["handle"].decode(String?.self), pds: try cells["pds"].decode(String.self),
            createdAt: try cells["created_at"].decode(Double?.self).map(Date.init(storedSeconds:)) ?? Date(storedSeconds: 0),
            secretsVersion: try cells["secrets_version"].decode(Int64.self)) { try record(cells) }
    }

    private static func record(_ cells: PostgresRandomAccessRow) throws -> AccountRecord {
        func text(_ name: String) throws -> String? { try cells[name].decode(String?.self) }
        func date(_ name: String) throws -> Date? { try cells[name].decode(Double?.self).map(Date.init(storedSeconds:)) }
        let rawAuthKind = try cells["auth_kind"].decode(String.self)
        let rawState = try cells["state"].decode(String.self)
        guard let authKind = AuthKind(rawValue: rawAuthKind) else {
            throw UnreadableRow("unknown auth_kind \"\(rawAuthKind)\"")
        }
        guard let state = AccountState(rawValue: rawState) else {
            throw UnreadableRow("unknown state \"\(rawState)\"")
        }
        var oauth: OAuthSessionInfo?
        if let issuer = try text("oauth_issuer") {
            guard let tokenEndpoint = try text("oauth_token_endpoint"), let scope = try text("oauth_scope"),
                  let started = try date("oauth_session_started_at"),
                  let clientKind = try text("oauth_client_kind").flatMap(OAuthClientKind.init(rawValue:)),
                  let clientID = try text("oauth_client_id")
            else { throw UnreadableRow("OAuth session columns set in part") }
            oauth = OAuthSessionInfo(issuer: issuer, tokenEndpoint: tokenEndpoint,
                                     revocationEndpoint: try text("oauth_revocation_endpoint"), scope: scope,
                                     sessionStartedAt: started, clientKind: clientKind, clientID: clientID,
                                     clientKeyID: try text("oauth_client_key_id"))
        }
        var profile: AccountProfile?
        if let fetched = try date("profile_fetched_at") {
            profile = AccountProfile(displayName: try text("profile_display_name"), avatar: try text("profile_avatar"),
                                     description: try text("profile_description"), fetchedAt: fetched)
        }
        return AccountRecord(
            id: try cells["id"].decode(UUID.self), did: try cells["did"].decode(String.self), handle: try text("handle"),
            handleVerified: try cells["handle_verified"].decode(Bool.self), pds: try cells["pds"].decode(String.self),
            authKind: authKind, state: state, stateReason: try text("state_reason"),
            isDefault: try cells["is_default"].decode(Bool.self),
            createdAt: try date("created_at") ?? Date(storedSeconds: 0), updatedAt: try date("updated_at"),
            lastRefreshAt: try date("last_refresh_at"), accessExpiresAt: try date("access_expires_at"),
            refreshExpiresAt: try date("refresh_expires_at"), refreshStartedAt: try date("refresh_started_at"),
            oauth: oauth, profile: profile, secretsVersion: try cells["secrets_version"].decode(Int64.self))
    }

    /// The binds of a new session's columns, in `sessionColumns`' order.
    static func sessionBinds(_ record: AccountRecord, into binds: inout PostgresBindings) {
        binds.append(record.did)
        binds.append(record.handle)
        binds.append(record.handleVerified)
        binds.append(record.pds)
        binds.append(record.authKind.rawValue)
        binds.append(record.state.rawValue)
        binds.append(record.stateReason)
        binds.append(record.updatedAt.storedSeconds)
        binds.append(record.lastRefreshAt?.storedSeconds)
        binds.append(record.accessExpiresAt?.storedSeconds)
        binds.append(record.refreshExpiresAt?.storedSeconds)
        binds.append(record.oauth?.issuer)
        binds.append(record.oauth?.tokenEndpoint)
        binds.append(record.oauth?.revocationEndpoint)
        binds.append(record.oauth?.scope)
        binds.append(record.oauth?.sessionStartedAt.storedSeconds)
        binds.append(record.oauth?.clientKind.rawValue)
        binds.append(record.oauth?.clientID)
        binds.append(record.oauth?.clientKeyID)
        binds.append(record.refreshServer)
    }

    /// The columns a login writes: what it decided, never the account's own (id, creation
    /// date, default flag, profile) nor the refresh bookkeeping.
    static let sessionColumns = [
        "did", "handle", "handle_verified", "pds", "auth_kind", "state", "state_reason", "updated_at",
        "last_refresh_at", "access_expires_at", "refresh_expires_at", "oauth_issuer", "oauth_token_endpoint",
        "oauth_revocation_endpoint", "oauth_scope", "oauth_session_started_at", "oauth_client_kind", "oauth_client_id",
        "oauth_client_key_id", "refresh_server",
    ]

    /// The binds of every metadata column but the id, `is_default`, the mark and the version,
    /// in `metadataColumns`' order.
    static func metadataBinds(_ record: AccountRecord, into binds: inout PostgresBindings) {
        sessionBinds(record, into: &binds)
        binds.append(record.createdAt.storedSeconds)
        binds.append(record.profile?.displayName)
        binds.append(record.profile?.avatar)
        binds.append(record.profile?.description)
        binds.append(record.profile?.fetchedAt.storedSeconds)
    }

    /// The metadata columns `metadataBinds` fills, in its order.
    static let metadataColumns = sessionColumns + [
        "created_at", "profile_display_name", "profile_avatar", "profile_description", "profile_fetched_at",
    ]
}
