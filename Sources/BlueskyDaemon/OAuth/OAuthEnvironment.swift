import ATOAuth
import BlueskyHTTP
import AccountStoreCore
import DPoP
import Foundation
import Logging
import Synchronization

/// What every OAuth account and login shares: the nonce cache, the clock-skew estimate, the HTTP
/// client for authorization servers and metadata, the URL policy, and the logins in progress.
final class OAuthEnvironment: Sendable {
    /// For authorization servers and metadata (PAR, tokens, revocation): async-http-client.
    /// PDS calls use the proxy's keep-alive client instead.
    let http: any HTTPFetching
    /// Latest `DPoP-Nonce` per (DID, server origin); a login uses its own scope until the DID is known.
    let nonces = DPoPNonceCache()
    /// The servers' clocks as seen in their `Date` headers, so proofs' `iat` match theirs.
    let clockSkew = ClockSkewEstimator()
    let policy: OAuthURLPolicy
    /// Logins waiting for their callback, by id and by state (single use, iss checked).
    let logins: LoginsInProgress
    /// The client blueskyd presents (loopback, hosted, or confidential with its keys).
    let client: OAuthClientIdentity
    /// The deadline of every request to an authorization server or for metadata
    /// (`upstream_timeout_seconds`), for its whole answer.
    let timeout: Duration
    let now: @Sendable () -> Date
    /// Other OAuth 2.0 servers named in the configuration (`[[provider]]`).
    let providers: ProviderTable

    init(http: any HTTPFetching, policy: OAuthURLPolicy, client: OAuthClientIdentity = .init(settings: .init(), keys: []),
         timeout: Duration, loginLifetime: TimeInterval = 30 * 60, providers: [ProviderSettings] = [],
         now: @escaping @Sendable () -> Date) {
        self.http = http
        self.providers = ProviderTable(providers)
        self.timeout = timeout
        self.policy = policy
        self.client = client
        self.logins = LoginsInProgress(lifetime: loginLifetime)
        self.now = now
    }

    /// A client of one authorization server for a stored session (refresh, revocation).
    /// - Throws: `NeedsLogin` when the confidential client key the session is bound to is gone.
    func serverClient(_ info: OAuthSessionInfo, account: UUID) throws(DaemonError) -> OAuthServerClient {
        guard let token = URL(string: info.tokenEndpoint) else {
            throw .internalError("the stored token endpoint is not a URL: \(info.tokenEndpoint)")
        }
        // Refresh and revocation use only the token and revocation endpoints; the others are
        // needed at login alone and are not stored.
        let endpoints = AuthorizationServerEndpoints(
            issuer: info.issuer, authorization: token, token: token, pushedAuthorizationRequest: token,
            revocation: info.revocationEndpoint.flatMap(URL.init(string:)))
        guard let authentication = client.authentication(for: info) else {
            throw .needsLogin(account: account, reason: "the client signing key \(info.clientKeyID ?? "(none)") this session is bound to is gone")
        }
        return serverClient(endpoints, authentication: authentication)
    }

    func serverClient(_ endpoints: AuthorizationServerEndpoints, authentication: ClientAuthentication) -> OAuthServerClient {
        OAuthServerClient(endpoints: endpoints, client: authentication, http: http, nonces: nonces,
                          clockSkew: clockSkew, timeout: timeout, now: now)
    }

    /// A client for PDS calls through `http` (the proxy's keep-alive client).
    func resourceClient(http: any HTTPFetching) -> DPoPResourceClient {
        DPoPResourceClient(http: http, nonces: nonces, clockSkew: clockSkew, now: now)
    }

    /// The nonces the cache holds for `did`, as rows for the store.
    func storedNonces(did: String, account: UUID) -> [StoredDPoPNonce] {
        nonces.entries(account: did).map {
            StoredDPoPNonce(account: account, origin: $0.origin, nonce: $0.nonce, receivedAt: $0.receivedAt)
        }
    }

    /// Warms the cache from the store at startup (nonces older than a few minutes are stale anyway).
    func importNonces(_ stored: [StoredDPoPNonce], didOf: [UUID: String]) {
        let entries = stored.compactMap { row in
            didOf[row.account].map { DPoPNonceCache.Entry(account: $0, origin: row.origin, nonce: row.nonce, receivedAt: row.receivedAt) }
        }
        nonces.importEntries(entries, now: now())
    }
}
