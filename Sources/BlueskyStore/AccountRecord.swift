import Foundation

/// How an account signs in.
public enum AuthKind: String, Codable, Sendable, CaseIterable {
    case appPassword = "app-password"
    case oauth
}

/// Whether an account's session is usable.
public enum AccountState: String, Codable, Sendable, CaseIterable {
    /// The session works (or will, after a routine refresh).
    case active
    /// The server refused the credentials; only a new sign-in helps.
    case needsLogin = "needs-login"
    /// A transient failure (network, 5xx); upkeep will retry.
    case retrying
}

/// One registered account: everything but its secrets, which are sealed in the
/// same row and only opened on request by `AccountStore.secrets(for:)`.
public struct AccountRecord: Sendable, Equatable, Codable {
    public var id: UUID
    public var did: String
    public var handle: String?
    public var handleVerified: Bool
    /// The PDS URL as a string.
    public var pds: String
    public var authKind: AuthKind
    public var state: AccountState
    /// The server's reason for `needsLogin`, or the last transient failure.
    public var stateReason: String?
    /// Managed by `AccountStore.setDefault(id:)`; `update(_:)` ignores it.
    public var isDefault: Bool
    public var createdAt: Date
    public var updatedAt: Date
    public var lastRefreshAt: Date?
    public var accessExpiresAt: Date?
    public var refreshExpiresAt: Date?
    /// Write-ahead mark: a refresh was in flight (set before the request, cleared with its result).
    /// Found set at startup, it means the daemon died mid-refresh and the refresh token may be spent.
    public var refreshStartedAt: Date?
    /// The OAuth session's facts; nil for app-password accounts.
    public var oauth: OAuthSessionInfo? {
        get { oauthBox?.info }
        set { oauthBox = newValue.map(OAuthSessionBox.init) }
    }
    /// Boxed: a daemon may hold 100,000 records, and app-password ones would otherwise each
    /// carry the room of an OAuth session's eight fields.
    private var oauthBox: OAuthSessionBox?

    private enum CodingKeys: String, CodingKey {
        case id, did, handle, handleVerified, pds, authKind, state, stateReason, isDefault, createdAt, updatedAt
        case lastRefreshAt, accessExpiresAt, refreshExpiresAt, refreshStartedAt
        case oauthBox = "oauth"
    }

    public init(
        id: UUID = UUID(),
        did: String,
        handle: String? = nil,
        handleVerified: Bool = false,
        pds: String,
        authKind: AuthKind,
        state: AccountState = .active,
        stateReason: String? = nil,
        isDefault: Bool = false,
        createdAt: Date = Date(),
        updatedAt: Date? = nil,
        lastRefreshAt: Date? = nil,
        accessExpiresAt: Date? = nil,
        refreshExpiresAt: Date? = nil,
        refreshStartedAt: Date? = nil,
        oauth: OAuthSessionInfo? = nil
    ) {
        self.id = id
        self.did = did
        self.handle = handle
        self.handleVerified = handleVerified
        self.pds = pds
        self.authKind = authKind
        self.state = state
        self.stateReason = stateReason
        self.isDefault = isDefault
        self.createdAt = createdAt
        self.updatedAt = updatedAt ?? createdAt
        self.lastRefreshAt = lastRefreshAt
        self.accessExpiresAt = accessExpiresAt
        self.refreshExpiresAt = refreshExpiresAt
        self.refreshStartedAt = refreshStartedAt
        self.oauthBox = oauth.map(OAuthSessionBox.init)
    }
}

/// An immutable box around an OAuth session's facts (a change makes a new box).
final class OAuthSessionBox: Sendable, Equatable, Codable {
    let info: OAuthSessionInfo

    init(_ info: OAuthSessionInfo) { self.info = info }

    static func == (a: OAuthSessionBox, b: OAuthSessionBox) -> Bool { a === b || a.info == b.info }

    init(from decoder: any Decoder) throws { info = try OAuthSessionInfo(from: decoder) }

    func encode(to encoder: any Encoder) throws { try info.encode(to: encoder) }
}
