import Foundation

/// Which kind of OAuth client an account's session belongs to; it decides how long the
/// authorization server lets the session live.
public enum OAuthClientKind: String, Codable, Sendable, CaseIterable {
    /// The atproto development client (`http://localhost?...`): public, sessions end 14 days after login.
    case loopback
    /// A hosted `client_id` metadata document without client authentication: public, 14 days.
    case hostedPublic = "hosted-public"
    /// A hosted client authenticating with `private_key_jwt`: sessions of up to 2 years.
    case confidential
    /// A client registered at another OAuth 2.0 server, holding a refresh token: the server
    /// sets no known end to the session; refreshes keep it.
    case oauth2
    /// A client at an OAuth 2.0 server that issued no refresh token: the session ends when its
    /// access token does (`AccountRecord.sessionEndsAt`), and only a login goes further.
    case oauth2AccessOnly = "oauth2-access-only"

    /// How long the reference server lets a session of this kind live after login; nil where
    /// no fixed lifetime is known (another OAuth 2.0 server's sessions).
    public var sessionLifetime: TimeInterval? {
        switch self {
        case .loopback, .hostedPublic: OAuthSessionInfo.publicSessionLifetime
        case .confidential: OAuthSessionInfo.confidentialSessionLifetime
        case .oauth2, .oauth2AccessOnly: nil
        }
    }
}

/// The OAuth facts of an account (nil for app-password accounts): enough to refresh and revoke
/// without discovering the authorization server again, and to tell when the session ends.
public struct OAuthSessionInfo: Sendable, Equatable, Codable {
    /// The issuer that granted the session (the callback's `iss`, checked against the DID's PDS).
    public var issuer: String
    public var tokenEndpoint: String
    /// Absent when the server publishes none; logout then only forgets the tokens.
    public var revocationEndpoint: String?
    /// The scope actually granted (it may be less than asked).
    public var scope: String
    /// When the user approved the login: public sessions end a fixed time after it.
    public var sessionStartedAt: Date
    public var clientKind: OAuthClientKind
    /// The exact `client_id` string every request of this session must repeat.
    public var clientID: String
    /// The `kid` of the signing key a confidential session authenticates with: the server binds
    /// the session to it, so refreshes must keep using it.
    public var clientKeyID: String?

    public init(issuer: String, tokenEndpoint: String, revocationEndpoint: String?, scope: String,
                sessionStartedAt: Date, clientKind: OAuthClientKind, clientID: String, clientKeyID: String? = nil) {
        self.issuer = issuer
        self.tokenEndpoint = tokenEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.scope = scope
        self.sessionStartedAt = sessionStartedAt
        self.clientKind = clientKind
        self.clientID = clientID
        self.clientKeyID = clientKeyID
    }

    /// How long public clients' sessions last on the reference server.
    public static let publicSessionLifetime: TimeInterval = 14 * 24 * 3600
    /// The longest a confidential client's session lasts (if it is refreshed at least every 90 days).
    public static let confidentialSessionLifetime: TimeInterval = 2 * 365 * 24 * 3600

    /// When the session ends for good, whatever the refreshes: only a new login goes further.
    public var sessionEndsAt: Date? {
        clientKind.sessionLifetime.map { sessionStartedAt.addingTimeInterval($0) }
    }
}

/// One persisted DPoP nonce: the latest `DPoP-Nonce` a server sent for an account.
/// Nonces are not secrets (servers send them in the clear to anyone), so they are stored plain.
public struct StoredDPoPNonce: Sendable, Equatable {
    /// One nonce per account and origin, the newest received, in (account, origin) order: what
    /// a batch saves, so that hosts saving the same pairs lock them in the same order.
    package static func newestPerOrigin(_ nonces: [StoredDPoPNonce]) -> [StoredDPoPNonce] {
        var newest: [String: StoredDPoPNonce] = [:]
        for entry in nonces {
            let key = entry.account.uuidString + " " + entry.origin
            if let kept = newest[key], kept.receivedAt > entry.receivedAt { continue }
            newest[key] = entry
        }
        return newest.sorted { $0.key < $1.key }.map(\.value)
    }

    public var account: UUID
    /// `scheme://host[:port]` of the server.
    public var origin: String
    public var nonce: String
    public var receivedAt: Date

    public init(account: UUID, origin: String, nonce: String, receivedAt: Date) {
        self.account = account
        self.origin = origin
        self.nonce = nonce
        self.receivedAt = receivedAt
    }
}

extension AccountRecord {
    /// When the session ends for good, whatever the refreshes: a public atproto client's fixed
    /// end, or the access token's expiry where the server issued no refresh token.
    public var sessionEndsAt: Date? {
        guard let oauth else { return nil }
        if oauth.clientKind == .oauth2AccessOnly { return accessExpiresAt }
        return oauth.sessionEndsAt
    }
}
