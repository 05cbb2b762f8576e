/// How a testbed is named, where it listens, and the token lifetimes its PDS hands out.
public struct TestbedConfiguration: Sendable {
    /// Hosts are `plc.<domain>`, `pds.<domain>`, the OAuth authorization servers `auth.<domain>`
    /// and `rogue-auth.<domain>`, hosted OAuth client metadata at `clients.<domain>`, and
    /// `<name>.<domain>` for handles.
    public var domain: String
    /// The IPv4 or IPv6 address to listen on; it is also a SAN of the server certificate.
    public var bindAddress: String
    /// 443 by default; 0 picks an ephemeral port (URLs then carry the port).
    public var port: Int
    /// Where `ca.pem` (the generated test CA certificate) is written; created if missing.
    public var directory: String
    /// Lifetime of access JWTs (the reference PDS: 2 hours). Works down to 1 second.
    public var accessTokenLifetime: Duration
    /// Lifetime of refresh JWTs (the reference PDS: 90 days).
    public var refreshTokenLifetime: Duration
    /// How long a rotated refresh token keeps returning its successor (the reference PDS: 2 hours).
    public var refreshGracePeriod: Duration
    /// Largest request body accepted (uploadBlob); larger requests get 413.
    public var maxRequestBodyBytes: Int
    /// Lifetime of OAuth access tokens (`expires_in`; the reference server: 15-60 minutes).
    /// Works down to 1 second.
    public var oauthAccessTokenLifetime: Duration
    /// How long an OAuth session of a public client lives after login, however often it is
    /// refreshed; an unused refresh token expires after the same time (the reference: 14 days).
    public var oauthSessionLifetime: Duration
    /// How long a confidential (`private_key_jwt`) client's session lives (the reference: 2 years).
    public var oauthConfidentialSessionLifetime: Duration
    /// How long a confidential client's refresh token may go unused (the reference: 3 months).
    public var oauthConfidentialRefreshIdleLifetime: Duration
    /// How long a pushed authorization request's `request_uri` stays usable (the reference: 5 minutes).
    public var pushedRequestLifetime: Duration
    /// How long an authorization code may wait for its exchange (the reference: 1 minute).
    public var authorizationCodeLifetime: Duration
    /// How often the DPoP nonces of the authorization server and of the PDS rotate; the previous,
    /// current and next nonce are accepted (the reference: 60 seconds).
    public var dpopNonceRotationPeriod: Duration
    /// How long refreshes (the OAuth refresh grant, `refreshSession`) take to answer after the
    /// tokens rotated: a distant server, and the window in which a crash loses the answer.
    public var refreshLatency: Duration = .zero

    public init(
        domain: String = "tb1.test",
        bindAddress: String = "127.0.0.1",
        port: Int = 443,
        directory: String = "/tmp/atproto-testbed",
        accessTokenLifetime: Duration = .seconds(2 * 3600),
        refreshTokenLifetime: Duration = .seconds(90 * 24 * 3600),
        refreshGracePeriod: Duration = .seconds(2 * 3600),
        maxRequestBodyBytes: Int = 8 * 1024 * 1024,
        oauthAccessTokenLifetime: Duration = .seconds(15 * 60),
        oauthSessionLifetime: Duration = .seconds(14 * 24 * 3600),
        oauthConfidentialSessionLifetime: Duration = .seconds(2 * 365 * 24 * 3600),
        oauthConfidentialRefreshIdleLifetime: Duration = .seconds(90 * 24 * 3600),
        pushedRequestLifetime: Duration = .seconds(5 * 60),
        authorizationCodeLifetime: Duration = .seconds(60),
        dpopNonceRotationPeriod: Duration = .seconds(60)
    ) {
        self.domain = domain.lowercased()
        self.bindAddress = bindAddress
        self.port = port
        self.directory = directory
        self.accessTokenLifetime = accessTokenLifetime
        self.refreshTokenLifetime = refreshTokenLifetime
        self.refreshGracePeriod = refreshGracePeriod
        self.maxRequestBodyBytes = maxRequestBodyBytes
        self.oauthAccessTokenLifetime = oauthAccessTokenLifetime
        self.oauthSessionLifetime = oauthSessionLifetime
        self.oauthConfidentialSessionLifetime = oauthConfidentialSessionLifetime
        self.oauthConfidentialRefreshIdleLifetime = oauthConfidentialRefreshIdleLifetime
        self.pushedRequestLifetime = pushedRequestLifetime
        self.authorizationCodeLifetime = authorizationCodeLifetime
        self.dpopNonceRotationPeriod = dpopNonceRotationPeriod
    }
}

/// The DID method an account's identity uses.
public enum DIDMethod: String, Sendable, Codable {
    /// `did:plc:…`, document served by `https://plc.<domain>/<did>`.
    case plc
    /// `did:web:<handle host>`, document at `https://<handle>/.well-known/did.json`.
    case web
}

/// What to create: a handle, passwords and the identity quirks a test needs.
public struct AccountSpec: Sendable {
    /// The handle becomes `<name>.<domain>`.
    public var name: String
    public var password: String
    /// A second password that also logs in (an app password, e.g. `abcd-efgh-ijkl-mnop`).
    public var appPassword: String
    public var didMethod: DIDMethod
    /// createSession first answers `AuthFactorTokenRequired`; the code is `TestAccount.authFactorToken`.
    public var requiresAuthFactor: Bool
    /// Serve `https://<handle>/.well-known/atproto-did`.
    public var publishWellKnown: Bool
    /// The handle the DID document claims (`alsoKnownAs`) when it should differ from the real one.
    public var documentHandle: String?
    /// Overrides `TestbedConfiguration.accessTokenLifetime` for this account.
    public var accessTokenLifetime: Duration?
    /// Posts (`app.bsky.feed.post`) created with the account, for timelines.
    public var initialPosts: Int

    public init(
        name: String,
        password: String = "password",
        appPassword: String = "abcd-efgh-ijkl-mnop",
        didMethod: DIDMethod = .plc,
        requiresAuthFactor: Bool = false,
        publishWellKnown: Bool = true,
        documentHandle: String? = nil,
        accessTokenLifetime: Duration? = nil,
        initialPosts: Int = 0
    ) {
        self.name = name.lowercased()
        self.password = password
        self.appPassword = appPassword
        self.didMethod = didMethod
        self.requiresAuthFactor = requiresAuthFactor
        self.publishWellKnown = publishWellKnown
        self.documentHandle = documentHandle
        self.accessTokenLifetime = accessTokenLifetime
        self.initialPosts = initialPosts
    }
}

/// An account as created: what a client needs to log in.
public struct TestAccount: Sendable, Equatable, Codable {
    public let did: String
    public let handle: String
    public let password: String
    public let appPassword: String
    /// The emailed sign-in code (only asked for when `requiresAuthFactor`).
    public let authFactorToken: String
}

/// What the PDS saw for one account, so tests assert on the server's view.
public struct AccountStats: Sendable, Equatable {
    public var sessionsCreated = 0
    /// Accepted refreshSession calls (grace-period reuses included).
    public var refreshes = 0
    /// Already-rotated refresh tokens presented within the grace period.
    public var refreshTokenReuses = 0
    /// refreshSession calls refused (expired, revoked, rotated past the grace period, wrong type).
    public var rejectedRefreshes = 0
    public var sessionsDeleted = 0
    /// Calls refused with `ExpiredToken` because the access token had expired.
    public var expiredAccessRejections = 0
    /// Calls that passed access-token authentication.
    public var authenticatedCalls = 0
    /// Calls refused with 401 `AccountDeactivated` by the PDS the account moved away from.
    public var deactivatedRejections = 0

    public init() {}
}

extension Duration {
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
