import Synchronization

/// What the OAuth authorization servers and the PDS's DPoP checks saw for one account (or, from
/// `Testbed.oauthTotals`, for all requests, including those no account could be named for).
public struct OAuthStats: Sendable, Equatable {
    /// PAR requests accepted.
    public var pushedAuthorizationRequests = 0
    /// Authorization codes handed out by the authorize endpoint.
    public var authorizationsApproved = 0
    /// Authorization codes exchanged for tokens.
    public var tokenExchanges = 0
    /// Refresh grants that rotated the tokens (lost responses included).
    public var refreshes = 0
    /// Refresh grants that came after the session's newest access token had expired: the client
    /// let it lapse (`Testbed.oauthRefreshMargins` has every grant's margin).
    public var refreshesAfterAccessExpiry = 0
    /// Refresh grants whose answer was dropped on purpose (`loseRefreshResponses`).
    public var lostRefreshResponses = 0
    /// Already-used refresh tokens presented again.
    public var refreshTokenReplays = 0
    /// Sessions deleted because a refresh token was replayed.
    public var sessionsDeletedByReplay = 0
    /// Token grants refused with `invalid_grant` (replays and expired sessions included).
    public var invalidGrants = 0
    /// Requests refused with `invalid_client` (unknown or invalid client, bad client assertion).
    public var clientAuthenticationFailures = 0
    /// Tokens revoked through the revocation endpoint.
    public var revocations = 0
    /// `use_dpop_nonce` answers from the authorization servers (HTTP 400).
    public var authorizationServerNonceChallenges = 0
    /// `use_dpop_nonce` answers from the PDS (HTTP 401 with `WWW-Authenticate`).
    public var pdsNonceChallenges = 0
    /// PDS calls that passed DPoP-bound access token authentication.
    public var authenticatedResourceCalls = 0
    /// PDS calls refused with `invalid_token` (expired, revoked, foreign or malformed tokens).
    public var invalidTokenRejections = 0
    /// Calls refused for a scope the session was not granted (403 ScopeMissingError).
    public var scopeRefusals = 0
    /// DPoP proofs refused, by the reference server's message (e.g. "Invalid DPoP key binding",
    /// "DPoP htu mismatch"). Missing or stale nonces are counted as challenges instead.
    public var dpopRejections: [String: Int] = [:]

    public init() {}

    /// All DPoP proof rejections, whatever the reason.
    public var totalDPoPRejections: Int { dpopRejections.values.reduce(0, +) }
}

/// OAuth counters per DID, plus totals over everything.
final class OAuthMetrics: Sendable {
    private struct Counters {
        var byDID: [String: OAuthStats] = [:]
        var totals = OAuthStats()
    }

    private let counters = Mutex(Counters())

    /// Counts into the account's stats (when the request could be tied to one) and the totals.
    func record(did: String?, _ update: (inout OAuthStats) -> Void) {
        counters.withLock { counters in
            update(&counters.totals)
            if let did { update(&counters.byDID[did, default: OAuthStats()]) }
        }
    }

    func stats(did: String) -> OAuthStats { counters.withLock { $0.byDID[did] ?? OAuthStats() } }

    var totals: OAuthStats { counters.withLock { $0.totals } }

    func reset() { counters.withLock { $0 = Counters() } }
}
