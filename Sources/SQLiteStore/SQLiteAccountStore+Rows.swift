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
    public static var databaseSelection: [any SQLSelectable] { AccountField.allCases.map(\.column) }

    public init(row: Row) throws {
        try self.init(row: row, layout: nil)
    }

    /// The record in `row`, its columns where `layout` found them in its statement's rows.
    init(row: Row, layout: AccountRowLayout?) throws {
        let rawAuthKind: String = row[.authKind, in: layout]
        let rawState: String = row[.state, in: layout]
        guard let authKind = AuthKind(rawValue: rawAuthKind) else {
            throw UnreadableRow("unknown auth_kind \"\(rawAuthKind)\"")
        }
        guard let state = AccountState(rawValue: rawState) else {
            throw UnreadableRow("unknown state \"\(rawState)\"")
        }
        self.init(
            id: row[.id, in: layout],
            did: row[.did, in: layout],
            handle: row[orNil: .handle, in: layout],
            handleVerified: row[.handleVerified, in: layout],
            pds: row[.pds, in: layout],
            authKind: authKind,
            state: state,
            stateReason: row[orNil: .stateReason, in: layout],
            isDefault: row[.isDefault, in: layout],
            createdAt: Self.date(row[orNil: .createdAt, in: layout]) ?? Date(storedSeconds: 0),
            updatedAt: Self.date(row[orNil: .updatedAt, in: layout]),
            lastRefreshAt: Self.date(row[orNil: .lastRefreshAt, in: layout]),
            accessExpiresAt: Self.date(row[orNil: .accessExpiresAt, in: layout]),
            refreshExpiresAt: Self.date(row[orNil: .refreshExpiresAt, in: layout]),
            refreshStartedAt: Self.date(row[orNil: .refreshStartedAt, in: layout]),
            oauth: try Self.oauth(row, layout),
            profile: Self.profile(row, layout),
            secretsVersion: row[.secretsVersion, in: layout])
    }

    private static func profile(_ row: Row, _ layout: AccountRowLayout?) -> AccountProfile? {
        guard let fetched = date(row[orNil: .profileFetchedAt, in: layout]) else { return nil }
        return AccountProfile(displayName: row[orNil: .profileDisplayName, in: layout], avatar: row[orNil: .profileAvatar, in: layout],
                              description: row[orNil: .profileDescription, in: layout], fetchedAt: fetched)
    }

    /// The OAuth columns, all or nothing: an issuer without the rest is a damaged row.
    private static func oauth(_ row: Row, _ layout: AccountRowLayout?) throws -> OAuthSessionInfo? {
        guard let issuer: String = row[orNil: .oauthIssuer, in: layout] else { return nil }
        let rawKind: String? = row[orNil: .oauthClientKind, in: layout]
        guard let tokenEndpoint: String = row[orNil: .oauthTokenEndpoint, in: layout],
              let scope: String = row[orNil: .oauthScope, in: layout],
              let started = date(row[orNil: .oauthSessionStartedAt, in: layout]),
              let clientKind = rawKind.flatMap(OAuthClientKind.init(rawValue:)),
              let clientID: String = row[orNil: .oauthClientID, in: layout]
        else {
            throw UnreadableRow("OAuth session columns set in part")
        }
        return OAuthSessionInfo(issuer: issuer, tokenEndpoint: tokenEndpoint,
                                revocationEndpoint: row[orNil: .oauthRevocationEndpoint, in: layout], scope: scope,
                                sessionStartedAt: started, clientKind: clientKind, clientID: clientID,
                                clientKeyID: row[orNil: .oauthClientKeyID, in: layout])
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
        try verified(row, layout: nil)
    }

    /// The same, with the columns where `layout` found them (a statement's rows: one layout).
    func verified(_ row: Row, layout: AccountRowLayout?) throws -> AccountRecord {
        let seal: Data? = row[orNil: .metadataSeal, in: layout]
        return try Self.parsed(row, layout: layout).verified { sealer.check($0, tenant: Self.tenant, seal: seal) }
    }

    /// The row read whole, or a tampered stand-in keeping the columns that locate it.
    static func parsed(_ row: Row) throws -> ParsedRow { try parsed(row, layout: nil) }

    static func parsed(_ row: Row, layout: AccountRowLayout?) throws -> ParsedRow {
        try ParsedRow.parse(id: row[.id, in: layout], did: row[.did, in: layout], handle: row[orNil: .handle, in: layout],
                            pds: row[.pds, in: layout],
                            createdAt: AccountRecord.date(row[orNil: .createdAt, in: layout]) ?? Date(storedSeconds: 0),
                            secretsVersion: row[.secretsVersion, in: layout]) { try AccountRecord(row: row, layout: layout) }
    }

    func seal(_ record: AccountRecord) -> Data { sealer.metadataSeal(record, tenant: Self.tenant) }
}
