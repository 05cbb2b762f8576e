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

/// Where the benchmark reads the testbed's counters: the testbed itself when it runs in this
/// process, or the upstream child over its pipes.
protocol OAuthCounterSource: Sendable {
    func oauthCounters(did: String) async throws -> OAuthCounters
}

extension Testbed: OAuthCounterSource {
    func oauthCounters(did: String) async throws -> OAuthCounters { OAuthCounters(oauthStats(did: did)) }
}

extension UpstreamProcess: OAuthCounterSource {
    func oauthCounters(did: String) async throws -> OAuthCounters {
        guard let reply = await send(UpstreamRequest.oauthCounters + " " + did),
              let counters = try? JSONDecoder().decode(OAuthCounters.self, from: Data(reply.utf8))
        else {
            throw BenchError.upstreamFailed("the testbed process did not answer `\(UpstreamRequest.oauthCounters)`")
        }
        return counters
    }
}

/// The requests the upstream child answers on its standard input, one line each.
enum UpstreamRequest {
    /// `oauth-counters <did>`: that account's `OAuthCounters`, as one JSON line.
    static let oauthCounters = "oauth-counters"

    /// The child's reply to one request line (`{}` for a request it does not know).
    static func answer(_ request: String, testbed: Testbed) -> Data {
        let words = request.split(separator: " ").map(String.init)
        if words.count == 2, words[0] == oauthCounters,
           let json = try? JSONEncoder().encode(OAuthCounters(testbed.oauthStats(did: words[1]))) {
            return json
        }
        return Data("{}".utf8)
    }
}
