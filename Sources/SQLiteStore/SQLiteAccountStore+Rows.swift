import AccountStoreCore
import Foundation
import GRDB

/// Row mapping for the `account` table.
///
/// Written by hand rather than through Codable so column names are explicit and
/// dates are stored as `Date.storedSeconds` (a REAL): exact round trips, cheap ordering.
extension AccountRecord: FetchableRecord, PersistableRecord {
    public static let databaseTableName = "account"

    /// Only the metadata columns, so fetching records never reads the sealed blob.
    public static var databaseSelection: [any SQLSelectable] {
        [AccountColumn.id, AccountColumn.did, AccountColumn.handle, AccountColumn.handleVerified, AccountColumn.pds,
         AccountColumn.authKind, AccountColumn.state, AccountColumn.stateReason, AccountColumn.isDefault,
         AccountColumn.createdAt, AccountColumn.updatedAt, AccountColumn.lastRefreshAt, AccountColumn.accessExpiresAt,
         AccountColumn.refreshExpiresAt, AccountColumn.refreshStartedAt,
         AccountColumn.oauthIssuer, AccountColumn.oauthTokenEndpoint, AccountColumn.oauthRevocationEndpoint,
         AccountColumn.oauthScope, AccountColumn.oauthSessionStartedAt, AccountColumn.oauthClientKind,
         AccountColumn.oauthClientID, AccountColumn.oauthClientKeyID,
         AccountColumn.profileDisplayName, AccountColumn.profileAvatar, AccountColumn.profileDescription,
         AccountColumn.profileFetchedAt, AccountColumn.secretsVersion, AccountColumn.metadataSeal]
    }

    public init(row: Row) throws {
        let rawAuthKind: String = row[AccountColumn.authKind]
        let rawState: String = row[AccountColumn.state]
        guard let authKind = AuthKind(rawValue: rawAuthKind) else {
            throw UnreadableRow("unknown auth_kind \"\(rawAuthKind)\"")
        }
        guard let state = AccountState(rawValue: rawState) else {
            throw UnreadableRow("unknown state \"\(rawState)\"")
        }
        self.init(
            id: row[AccountColumn.id],
            did: row[AccountColumn.did],
            handle: row[AccountColumn.handle],
            handleVerified: row[AccountColumn.handleVerified],
            pds: row[AccountColumn.pds],
            authKind: authKind,
            state: state,
            stateReason: row[AccountColumn.stateReason],
            isDefault: row[AccountColumn.isDefault],
            createdAt: Self.date(row[AccountColumn.createdAt]) ?? Date(storedSeconds: 0),
            updatedAt: Self.date(row[AccountColumn.updatedAt]),
            lastRefreshAt: Self.date(row[AccountColumn.lastRefreshAt]),
            accessExpiresAt: Self.date(row[AccountColumn.accessExpiresAt]),
            refreshExpiresAt: Self.date(row[AccountColumn.refreshExpiresAt]),
            refreshStartedAt: Self.date(row[AccountColumn.refreshStartedAt]),
            oauth: try Self.oauth(row),
            profile: Self.profile(row),
            secretsVersion: row[AccountColumn.secretsVersion])
    }

    private static func profile(_ row: Row) -> AccountProfile? {
        guard let fetched = date(row[AccountColumn.profileFetchedAt]) else { return nil }
        return AccountProfile(displayName: row[AccountColumn.profileDisplayName], avatar: row[AccountColumn.profileAvatar],
                              description: row[AccountColumn.profileDescription], fetchedAt: fetched)
    }

    /// The OAuth columns, all or nothing: an issuer without the rest is a damaged row.
    private static func oauth(_ row: Row) throws -> OAuthSessionInfo? {
        guard let issuer: String = row[AccountColumn.oauthIssuer] else { return nil }
        let rawKind: String? = row[AccountColumn.oauthClientKind]
        guard let tokenEndpoint: String = row[AccountColumn.oauthTokenEndpoint],
              let scope: String = row[AccountColumn.oauthScope],
              let started = date(row[AccountColumn.oauthSessionStartedAt]),
              let clientKind = rawKind.flatMap(OAuthClientKind.init(rawValue:)),
              let clientID: String = row[AccountColumn.oauthClientID]
        else {
            throw UnreadableRow("OAuth session columns set in part")
        }
        return OAuthSessionInfo(issuer: issuer, tokenEndpoint: tokenEndpoint,
                                revocationEndpoint: row[AccountColumn.oauthRevocationEndpoint], scope: scope,
                                sessionStartedAt: started, clientKind: clientKind, clientID: clientID,
                                clientKeyID: row[AccountColumn.oauthClientKeyID])
    }

    public func encode(to container: inout PersistenceContainer) throws {
        container[AccountColumn.id] = id
        container[AccountColumn.did] = did
        container[AccountColumn.handle] = handle
        container[AccountColumn.handleVerified] = handleVerified
        container[AccountColumn.pds] = pds
        container[AccountColumn.authKind] = authKind.rawValue
        container[AccountColumn.state] = state.rawValue
        container[AccountColumn.stateReason] = stateReason
        container[AccountColumn.isDefault] = isDefault
        container[AccountColumn.createdAt] = createdAt.storedSeconds
        container[AccountColumn.updatedAt] = updatedAt.storedSeconds
        container[AccountColumn.lastRefreshAt] = lastRefreshAt?.storedSeconds
        container[AccountColumn.accessExpiresAt] = accessExpiresAt?.storedSeconds
        container[AccountColumn.refreshExpiresAt] = refreshExpiresAt?.storedSeconds
        container[AccountColumn.refreshStartedAt] = refreshStartedAt?.storedSeconds
        container[AccountColumn.oauthIssuer] = oauth?.issuer
        container[AccountColumn.oauthTokenEndpoint] = oauth?.tokenEndpoint
        container[AccountColumn.oauthRevocationEndpoint] = oauth?.revocationEndpoint
        container[AccountColumn.oauthScope] = oauth?.scope
        container[AccountColumn.oauthSessionStartedAt] = oauth?.sessionStartedAt.storedSeconds
        container[AccountColumn.oauthClientKind] = oauth?.clientKind.rawValue
        container[AccountColumn.oauthClientID] = oauth?.clientID
        container[AccountColumn.oauthClientKeyID] = oauth?.clientKeyID
        container[AccountColumn.profileDisplayName] = profile?.displayName
        container[AccountColumn.profileAvatar] = profile?.avatar
        container[AccountColumn.profileDescription] = profile?.description
        container[AccountColumn.profileFetchedAt] = profile?.fetchedAt.storedSeconds
        container[AccountColumn.secretsVersion] = secretsVersion
    }

    static func date(_ seconds: Double?) -> Date? {
        seconds.map(Date.init(storedSeconds:))
    }
}

/// An account row as inserted: the record plus its sealed secrets blob and metadata seal.
struct SealedAccountRow: PersistableRecord {
    static let databaseTableName = AccountRecord.databaseTableName
    var record: AccountRecord
    var sealedSecrets: Data
    var metadataSeal: Data

    func encode(to container: inout PersistenceContainer) throws {
        try record.encode(to: &container)
        container[AccountColumn.sealedSecrets] = sealedSecrets
        container[AccountColumn.metadataSeal] = metadataSeal
    }
}

/// Column names of the `account` table.
enum AccountColumn {
    static let id = Column("id")
    static let did = Column("did")
    static let handle = Column("handle")
    static let handleVerified = Column("handle_verified")
    static let pds = Column("pds")
    static let authKind = Column("auth_kind")
    static let state = Column("state")
    static let stateReason = Column("state_reason")
    static let isDefault = Column("is_default")
    static let createdAt = Column("created_at")
    static let updatedAt = Column("updated_at")
    static let lastRefreshAt = Column("last_refresh_at")
    static let accessExpiresAt = Column("access_expires_at")
    static let refreshExpiresAt = Column("refresh_expires_at")
    static let refreshStartedAt = Column("refresh_started_at")
    static let oauthIssuer = Column("oauth_issuer")
    static let oauthTokenEndpoint = Column("oauth_token_endpoint")
    static let oauthRevocationEndpoint = Column("oauth_revocation_endpoint")
    static let oauthScope = Column("oauth_scope")
    static let oauthSessionStartedAt = Column("oauth_session_started_at")
    static let oauthClientKind = Column("oauth_client_kind")
    static let oauthClientID = Column("oauth_client_id")
    static let oauthClientKeyID = Column("oauth_client_key_id")
    static let profileDisplayName = Column("profile_display_name")
    static let profileAvatar = Column("profile_avatar")
    static let profileDescription = Column("profile_description")
    static let profileFetchedAt = Column("profile_fetched_at")
    static let secretsVersion = Column("secrets_version")
    static let leaseOwner = Column("lease_owner")
    static let leaseExpiresAt = Column("lease_expires_at")
    /// Not part of `AccountRecord`: listing accounts never touches secrets.
    static let sealedSecrets = Column("sealed_secrets")
    /// The MAC over the columns that decide where tokens go (`SecretSealer.metadataSeal`).
    static let metadataSeal = Column("metadata_seal")
}

extension SQLiteAccountStore {
    /// A SQLite store holds one user's accounts: its seals name no tenant.
    static let tenant = ""

    /// The record in `row`, marked altered when its metadata seal does not hold or a column
    /// holds what blueskyd cannot read (`UnreadableRow`).
    func verified(_ row: Row) throws -> AccountRecord {
        let seal: Data? = row[AccountColumn.metadataSeal]
        return try Self.parsed(row).verified { sealer.check($0, tenant: Self.tenant, seal: seal) }
    }

    /// The row read whole, or a tampered stand-in keeping the columns that locate it.
    static func parsed(_ row: Row) throws -> ParsedRow {
        try ParsedRow.parse(id: row[AccountColumn.id], did: row[AccountColumn.did], handle: row[AccountColumn.handle],
                            pds: row[AccountColumn.pds],
                            createdAt: AccountRecord.date(row[AccountColumn.createdAt]) ?? Date(storedSeconds: 0),
                            secretsVersion: row[AccountColumn.secretsVersion]) { try AccountRecord(row: row) }
    }

    func seal(_ record: AccountRecord) -> Data { sealer.metadataSeal(record, tenant: Self.tenant) }
}
