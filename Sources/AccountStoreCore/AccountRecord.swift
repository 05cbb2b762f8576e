import Foundation
import Synchronization
import WebBasics

/// How an account signs in.
public enum AuthKind: String, Codable, Sendable, CaseIterable {
    case appPassword = "app-password"
    /// atproto OAuth: PAR, PKCE, DPoP-bound tokens.
    case oauth
    /// Any other OAuth 2.0 server (a Mastodon instance, NeoDB, a plain provider): bearer
    /// tokens, calls only to the account's own server (`pds` holds its origin).
    case oauth2
}

/// What a store found of a row's metadata seal.
public enum AccountSealCheck: String, Sendable, Equatable {
    /// The seal covers the row as it is.
    case holds
    /// No seal of this version: a row from before seals, one sealed by an older blueskyd whose
    /// seal did not cover the handle and default, or one whose seal someone removed.
    /// `blueskyd store reseal --dry-run` tells these apart and seals only the first two.
    case unsealed
    /// A seal that does not match the row: someone without the store key changed it. Only a
    /// new login mends it.
    case tampered
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
///
/// Laid out for a daemon holding 100,000 of them: strings and dates first, the optional dates
/// as plain seconds (-∞ for none) rather than 9-byte optionals padded to 16, the one-byte
/// fields last, and an OAuth session's eight fields behind one pointer.
public struct AccountRecord: Sendable, Equatable {
    public var id: UUID
    public var did: String
    public var handle: String?
    /// The PDS URL as a string.
    public var pds: String
    /// The server's reason for `needsLogin`, or the last transient failure.
    public var stateReason: String?
    public var createdAt: Date
    public var updatedAt: Date
    private var lastRefreshSeconds: Double
    private var accessExpirySeconds: Double
    private var refreshExpirySeconds: Double
    private var refreshStartSeconds: Double
    /// Which generation of the sealed secrets this record was read with: every save of new
    /// tokens adds one, so a host holding an older number knows another has refreshed.
    public var secretsVersion: Int64
    /// Boxed: app-password records would otherwise each carry the room of an OAuth session.
    private var oauthBox: OAuthSessionBox?
    private var profileBox: AccountProfileBox?
    public var handleVerified: Bool
    public var authKind: AuthKind
    public var state: AccountState
    /// Managed by `AccountStore.setDefault(id:)`; `update(_:)` ignores it.
    public var isDefault: Bool
    /// What the store found of the row's metadata seal when it read it; `.holds` for a record
    /// made in memory. Only a store sets anything else (`markedAltered`).
    public private(set) var sealCheck: AccountSealCheck = .holds

    public var lastRefreshAt: Date? {
        get { Self.date(lastRefreshSeconds) }
        set { lastRefreshSeconds = Self.seconds(newValue) }
    }
    public var accessExpiresAt: Date? {
        get { Self.date(accessExpirySeconds) }
        set { accessExpirySeconds = Self.seconds(newValue) }
    }
    public var refreshExpiresAt: Date? {
        get { Self.date(refreshExpirySeconds) }
        set { refreshExpirySeconds = Self.seconds(newValue) }
    }
    /// Write-ahead mark: a refresh was in flight (set before the request, cleared with its result).
    /// Found set at startup, it means the daemon died mid-refresh and the refresh token may be spent.
    public var refreshStartedAt: Date? {
        get { Self.date(refreshStartSeconds) }
        set { refreshStartSeconds = Self.seconds(newValue) }
    }
    /// The OAuth session's facts; nil for app-password accounts.
    public var oauth: OAuthSessionInfo? {
        get { oauthBox?.info }
        set { oauthBox = newValue.map(OAuthSessionBox.init) }
    }

    /// The account's profile as last fetched; nil until fetched (and after a logout).
    public var profile: AccountProfile? {
        get { profileBox?.profile }
        set { profileBox = newValue.map(AccountProfileBox.init) }
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
        oauth: OAuthSessionInfo? = nil,
        profile: AccountProfile? = nil,
        secretsVersion: Int64 = 1
    ) {
        self.id = id
        self.did = did
        self.handle = handle
        self.pds = pds
        self.stateReason = stateReason
        self.createdAt = createdAt
        self.updatedAt = updatedAt ?? createdAt
        self.lastRefreshSeconds = Self.seconds(lastRefreshAt)
        self.accessExpirySeconds = Self.seconds(accessExpiresAt)
        self.refreshExpirySeconds = Self.seconds(refreshExpiresAt)
        self.refreshStartSeconds = Self.seconds(refreshStartedAt)
        self.secretsVersion = secretsVersion
        self.oauthBox = oauth.map(OAuthSessionBox.init)
        self.profileBox = profile.map(AccountProfileBox.init)
        self.handleVerified = handleVerified
        self.authKind = authKind
        self.state = state
        self.isDefault = isDefault
    }

    /// "No date" as seconds: no real date is this far back, and unlike NaN it equals itself, so
    /// the synthesized `==` holds.
    private static let noDate = -Double.infinity

    private static func date(_ seconds: Double) -> Date? {
        seconds == noDate ? nil : Date(timeIntervalSinceReferenceDate: seconds)
    }

    private static func seconds(_ date: Date?) -> Double {
        date?.timeIntervalSinceReferenceDate ?? noDate
    }
}

/// An immutable box around an OAuth session's facts (a change makes a new box).
final class OAuthSessionBox: Sendable, Equatable {
    let info: OAuthSessionInfo

    init(_ info: OAuthSessionInfo) { self.info = info }

    static func == (a: OAuthSessionBox, b: OAuthSessionBox) -> Bool { a === b || a.info == b.info }
}

extension AccountRecord {
    /// The server an account's refreshes go to: the OAuth session's token endpoint, or the
    /// app password's PDS, as its origin (so `https://pds:443` and `https://PDS` are one
    /// server). Refresh limits are per server, and the shared schedule keeps it per row.
    public var refreshServer: String { Self.refreshServer(pds: pds, tokenEndpoint: oauth?.tokenEndpoint) }

    /// The refresh server of an account at `pds` with an OAuth session at `tokenEndpoint`.
    public static func refreshServer(pds: String, tokenEndpoint: String?) -> String {
        let endpoint = tokenEndpoint ?? pds
        if let known = knownRefreshServers.withLock({ $0[endpoint] }) { return known }
        let server: String
        if let components = URLComponents(string: endpoint), let host = components.host,
           let origin = URLOrigin(scheme: components.scheme ?? "https", host: host, port: components.port) {
            server = origin.string
        } else {
            server = endpoint
        }
        knownRefreshServers.withLock { known in
            if known.count >= 1_024 { known.removeAll(keepingCapacity: true) }
            known[endpoint] = server
        }
        return server
    }

    /// Endpoints already parsed: a start-up asks once per account (100,000 URL parses took a
    /// quarter of loading), and accounts share a handful of servers. Bounded, for a registry
    /// whose every account has a PDS of its own.
    private static let knownRefreshServers = Mutex<[String: String]>([:])
}

extension AccountRecord {
    /// Whether the store found the account's row rewritten outside blueskyd (its metadata seal
    /// does not hold): it needs a new login, and its tokens go nowhere meanwhile.
    /// Takes what an identity check found (`saveIdentity`): the handle, whether it is
    /// verified, the PDS; nothing else of `other`, which may be older than this record.
    public mutating func merge(identityOf other: AccountRecord) {
        handle = other.handle
        handleVerified = other.handleVerified
        pds = other.pds
        updatedAt = other.updatedAt
    }

    public var isAltered: Bool { state == .needsLogin && stateReason == StoreError.recordAlteredReason }

    /// The record as a store hands back a row whose metadata seal does not hold.
    public func markedAltered(_ check: AccountSealCheck = .tampered) -> AccountRecord {
        var record = self
        record.state = .needsLogin
        record.stateReason = StoreError.recordAlteredReason
        record.sealCheck = check == .holds ? .tampered : check
        return record
    }

    /// Whether the row's handle, verified flag and default flag may name this account: only
    /// when its seal covers them. A row that is not sealed (or whose seal fails) is reachable by
    /// its id and DID alone, so that it can be removed or logged in again.
    public var selectorsAreSealed: Bool { !isAltered }
}
