import Foundation

/// OAuth: where the authorization servers are, the switches for their misbehaviours, and the
/// counters tests assert on.
extension Testbed {
    /// The PDS's authorization server (`https://auth.<domain>[:port]`): the issuer its
    /// protected-resource metadata names. Endpoints: `/oauth/par`, `/oauth/authorize`,
    /// `/oauth/token`, `/oauth/revoke`, metadata at `/.well-known/oauth-authorization-server`.
    public var oauthIssuer: String { context.url(host: context.oauth.issuer.host) }

    /// A second, fully working authorization server (`https://rogue-auth.<domain>[:port]`) that
    /// is no DID's authorization server: it approves logins for the testbed's accounts, but a
    /// client that checks the issuer binding must refuse its tokens, and the PDS refuses them.
    public var rogueOAuthIssuer: String { context.url(host: context.oauth.rogueIssuer.host) }

    /// `<pdsURL>/.well-known/oauth-protected-resource`.
    public var protectedResourceMetadataURL: String { pdsURL + "/.well-known/oauth-protected-resource" }

    /// The https client_id of a hosted client whose metadata document is served by the testbed
    /// at `path` (`https://clients.<domain>[:port]<path>`); publish the document there first.
    public func oauthClientID(path: String) -> String {
        context.url(host: context.oauth.clientsHost) + (path.hasPrefix("/") ? path : "/" + path)
    }

    /// Serves `document` (client metadata JSON, or a JWKS for a `jwks_uri`) at
    /// `oauthClientID(path:)`; nil stops serving it. The authorization servers read it from
    /// here, so a change applies to the next request.
    public func publishOAuthClientMetadata(path: String, document: [UInt8]?) {
        context.oauth.clients.publish(path: path.hasPrefix("/") ? path : "/" + path, document: document)
    }

    /// Switches a misbehaviour on or off, effective from the next request.
    public func setOAuthMisbehaviour(_ misbehaviour: OAuthMisbehaviour, enabled: Bool) {
        context.oauth.misbehaviours.set(misbehaviour, enabled: enabled)
        if misbehaviour == .newNonceOnEveryResponse { context.oauth.setNonceChurn(enabled) }
    }

    /// The next `count` successful refresh grants rotate the tokens server-side, then drop the
    /// connection instead of answering: the client never sees its new refresh token, and
    /// presenting the old one again is a replay. `count` 0 clears it.
    public func loseRefreshResponses(count: Int) {
        context.oauth.misbehaviours.loseRefreshResponses(count: count)
    }

    /// The next `count` requests to an OAuth endpoint (both issuers) get `status` with an OAuth
    /// error body (`error`, by default `server_error`, or `rate_limit_exceeded` for 429), or an
    /// HTML page when `html`, plus `Retry-After` when given. A new injection for the same
    /// endpoint replaces the previous one; `count` 0 clears it.
    public func injectOAuthFailures(endpoint: OAuthEndpoint, status: Int, count: Int, retryAfterSeconds: Int? = nil,
                                    error: String? = nil, html: Bool = false) {
        context.failures.inject(nsid: endpoint.failureKey, status: status, count: count, retryAfterSeconds: retryAfterSeconds,
                                errorName: error, html: html)
    }

    /// How many of the failures injected for `endpoint` have not been served yet: 0 once a client
    /// met the whole burst.
    public func pendingOAuthFailures(endpoint: OAuthEndpoint) -> Int {
        pendingFailures(nsid: endpoint.failureKey)
    }

    /// The account the authorize endpoint approves when a request has no `login_hint` (nil:
    /// the first account created).
    public func setOAuthApprovalAccount(did: String?) {
        context.oauth.defaultApprovalDID.withLock { $0 = did }
    }

    /// OAuth and DPoP counters for one account (all zero for an unknown DID).
    public func oauthStats(did: String) -> OAuthStats { context.oauth.metrics.stats(did: did) }

    /// OAuth and DPoP counters over every request, including those no account could be named for.
    public var oauthTotals: OAuthStats { context.oauth.metrics.totals }

    /// The last DPoP-bound request the PDS accepted for `did` (proof, target, token, bound key).
    public func lastDPoPResourceRequest(did: String) -> RecordedDPoPRequest? {
        context.oauth.lastResourceRequests.withLock { $0[did] }
    }

    /// The latest POSTs to both authorization servers' PAR, token and revocation endpoints
    /// (the last 256, oldest first), each with its DPoP proof and the answer's status and OAuth
    /// error: challenged, refused and injected-failure requests included.
    public var authorizationServerRequests: [RecordedAuthorizationServerRequest] {
        context.oauth.authorizationServerRequests.all
    }

    /// Live OAuth sessions of an account at the PDS's authorization server.
    public func oauthSessionCount(did: String) -> Int {
        context.oauth.issuer.storage.withLock { $0.liveSessionCount(did: did) }
    }

    /// Zeroes the OAuth counters, forgets the recorded authorization-server requests and switches
    /// every misbehaviour off (sessions are kept).
    public func resetOAuth() {
        context.oauth.metrics.reset()
        context.oauth.refreshMargins.reset()
        context.oauth.authorizationServerRequests.reset()
        context.oauth.misbehaviours.reset()
        context.oauth.setNonceChurn(false)
        for endpoint in OAuthEndpoint.allCases { context.failures.inject(nsid: endpoint.failureKey, status: 500, count: 0, retryAfterSeconds: nil) }
    }
}
