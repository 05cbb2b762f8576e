import Foundation

/// What an export file holds, as JSON inside its sealed parts (`ExportFile`): every field of
/// an account's row by name, its secrets, and the store's client keys and nonces. Dates are
/// seconds as stored (exact round trips); field names are the file format's, kept stable
/// across versions of blueskyd that read the same format version.
struct ExportedAccount: Codable, Equatable {
    var id: UUID
    var did: String
    var handle: String?
    var handleVerified: Bool
    var pds: String
    var authKind: AuthKind
    var state: AccountState
    var stateReason: String?
    var isDefault: Bool
    var createdAt: Double
    var updatedAt: Double
    var lastRefreshAt: Double?
    var accessExpiresAt: Double?
    var refreshExpiresAt: Double?
    var refreshStartedAt: Double?
    var oauth: OAuthSessionInfo?
    var profile: ExportedProfile?
    var secretsVersion: Int64
    var secrets: AccountSecrets

    init(_ account: PortableAccount) {
        let record = account.record
        id = record.id
        did = record.did
        handle = record.handle
        handleVerified = record.handleVerified
        pds = record.pds
        authKind = record.authKind
        state = record.state
        stateReason = record.stateReason
        isDefault = record.isDefault
        createdAt = record.createdAt.storedSeconds
        updatedAt = record.updatedAt.storedSeconds
        lastRefreshAt = record.lastRefreshAt?.storedSeconds
        accessExpiresAt = record.accessExpiresAt?.storedSeconds
        refreshExpiresAt = record.refreshExpiresAt?.storedSeconds
        refreshStartedAt = record.refreshStartedAt?.storedSeconds
        oauth = record.oauth
        profile = record.profile.map(ExportedProfile.init)
        secretsVersion = record.secretsVersion
        secrets = account.secrets
    }

    var portable: PortableAccount {
        let record = AccountRecord(
            id: id, did: did, handle: handle, handleVerified: handleVerified, pds: pds, authKind: authKind, state: state,
            stateReason: stateReason, isDefault: isDefault, createdAt: Date(storedSeconds: createdAt),
            updatedAt: Date(storedSeconds: updatedAt), lastRefreshAt: lastRefreshAt.map(Date.init(storedSeconds:)),
            accessExpiresAt: accessExpiresAt.map(Date.init(storedSeconds:)),
            refreshExpiresAt: refreshExpiresAt.map(Date.init(storedSeconds:)),
            refreshStartedAt: refreshStartedAt.map(Date.init(storedSeconds:)), oauth: oauth,
            profile: profile?.profile, secretsVersion: secretsVersion)
        return PortableAccount(record: record, secrets: secrets)
    }
}

struct ExportedProfile: Codable, Equatable {
    var displayName: String?
    var avatar: String?
    var description: String?
    var fetchedAt: Double

    init(_ profile: AccountProfile) {
        displayName = profile.displayName
        avatar = profile.avatar
        description = profile.description
        fetchedAt = profile.fetchedAt.storedSeconds
    }

    var profile: AccountProfile {
        AccountProfile(displayName: displayName, avatar: avatar, description: description, fetchedAt: Date(storedSeconds: fetchedAt))
    }
}

/// The store's client keys (the export's first part) and nonces (the parts after it).
struct ExportedClientKey: Codable, Equatable {
    var keyID: String
    var privateKey: Data
    var createdAt: Double

    init(_ key: StoredClientKey) {
        keyID = key.keyID
        privateKey = key.privateKey
        createdAt = key.createdAt.storedSeconds
    }

    var key: StoredClientKey { StoredClientKey(keyID: keyID, privateKey: privateKey, createdAt: Date(storedSeconds: createdAt)) }
}

struct ExportedNonce: Codable, Equatable {
    var account: UUID
    var origin: String
    var nonce: String
    var receivedAt: Double

    init(_ nonce: StoredDPoPNonce) {
        account = nonce.account
        origin = nonce.origin
        self.nonce = nonce.nonce
        receivedAt = nonce.receivedAt.storedSeconds
    }

    var stored: StoredDPoPNonce { StoredDPoPNonce(account: account, origin: origin, nonce: nonce, receivedAt: Date(storedSeconds: receivedAt)) }
}

/// The export's last part: how many of each it holds, so that a file cut short at a part's
/// boundary is refused too.
struct ExportedSummary: Codable, Equatable {
    var accounts: Int
    var clientKeys: Int
    var nonces: Int
}
