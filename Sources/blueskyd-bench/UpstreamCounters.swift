import ATTestbed
import Foundation

/// The testbed's OAuth counters for the benchmark account, as the nonce section reads them.
struct OAuthCounters: Codable, Sendable, Equatable {
    /// `use_dpop_nonce` answers from the PDS.
    var pdsNonceChallenges = 0
    /// PDS calls that passed DPoP-bound token authentication.
    var authenticatedResourceCalls = 0
    /// PDS calls refused with `invalid_token`.
    var invalidTokenRejections = 0
    /// DPoP proofs refused for another reason than the nonce.
    var dpopRejections = 0
    /// Refresh grants (none should happen while measuring).
    var refreshes = 0

    init() {}

    init(_ stats: OAuthStats) {
        pdsNonceChallenges = stats.pdsNonceChallenges
        authenticatedResourceCalls = stats.authenticatedResourceCalls
        invalidTokenRejections = stats.invalidTokenRejections
        dpopRejections = stats.totalDPoPRejections
        refreshes = stats.refreshes
    }

    /// What happened between `earlier` and these counters.
    func since(_ earlier: OAuthCounters) -> OAuthCounters {
        var delta = OAuthCounters()
        delta.pdsNonceChallenges = pdsNonceChallenges - earlier.pdsNonceChallenges
        delta.authenticatedResourceCalls = authenticatedResourceCalls - earlier.authenticatedResourceCalls
        delta.invalidTokenRejections = invalidTokenRejections - earlier.invalidTokenRejections
        delta.dpopRejections = dpopRejections - earlier.dpopRejections
        delta.refreshes = refreshes - earlier.refreshes
        return delta
    }
}

/// The testbed's OAuth counters over every request, for the refresh sections: what must stay
/// at zero while an authorization server is under load.
struct OAuthTotals: Codable, Sendable {
    var refreshes = 0
    /// Refreshes after the previous access token had expired.
    var refreshesAfterAccessExpiry = 0
    var refreshTokenReplays = 0
    var invalidGrants = 0
    var clientAuthenticationFailures = 0
    /// `use_dpop_nonce` answers of the authorization server.
    var authorizationServerNonceChallenges = 0
    var pdsNonceChallenges = 0
    var dpopRejections = 0
    var invalidTokenRejections = 0

    init(_ stats: OAuthStats) {
        refreshes = stats.refreshes
        refreshesAfterAccessExpiry = stats.refreshesAfterAccessExpiry
        refreshTokenReplays = stats.refreshTokenReplays
        invalidGrants = stats.invalidGrants
        clientAuthenticationFailures = stats.clientAuthenticationFailures
        authorizationServerNonceChallenges = stats.authorizationServerNonceChallenges
        pdsNonceChallenges = stats.pdsNonceChallenges
        dpopRejections = stats.totalDPoPRejections
        invalidTokenRejections = stats.invalidTokenRejections
    }
}

/// What the testbed's PDS saw for one app-password account.
struct AppPasswordCounters: Codable, Sendable {
    /// Accepted refreshSession calls (grace-period reuses included).
    var refreshes = 0
    /// Already-rotated refresh tokens presented again within the grace period.
    var refreshTokenReuses = 0
    /// refreshSession calls refused.
    var rejectedRefreshes = 0
    /// Calls refused with `ExpiredToken`.
    var expiredAccessRejections = 0

    init(_ stats: AccountStats) {
        refreshes = stats.refreshes
        refreshTokenReuses = stats.refreshTokenReuses
        rejectedRefreshes = stats.rejectedRefreshes
        expiredAccessRejections = stats.expiredAccessRejections
    }
}
