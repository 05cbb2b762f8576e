import BlueskyStore
import Foundation
import WebBasics

/// How many refreshes may run at once: overall, and against one server. The defaults carry
/// 100,000 OAuth accounts whose tokens all expire within 15 minutes through a token endpoint
/// that takes 100 ms (about 110 refreshes a second are needed; 16 at a time at one server
/// give 160), while a slow or failing server holds at most 16 of the 64 slots.
struct RefreshLimits: Sendable, Equatable {
    var overall: Int
    var perHost: Int

    static let `default` = RefreshLimits(overall: 64, perHost: 16)
}

/// Small numbers for server names, so that 100,000 accounts carry two bytes each, not a string.
final class HostTable {
    static let unknown: RefreshScheduler.HostID = 0
    private var ids: [String: RefreshScheduler.HostID] = [:]

    func id(for host: String) -> RefreshScheduler.HostID {
        if let id = ids[host] { return id }
        // Past 65,534 servers, the rest share the last number (and its limit).
        let id = RefreshScheduler.HostID(min(ids.count + 1, Int(RefreshScheduler.HostID.max)))
        ids[host] = id
        return id
    }
}

extension AccountRecord {
    /// The server an account's refreshes go to: the OAuth session's token endpoint, or the
    /// app password's PDS, as its origin (so `https://pds:443` and `https://PDS` share one limit).
    var refreshHost: String {
        let endpoint = oauth?.tokenEndpoint ?? pds
        guard let components = URLComponents(string: endpoint), let host = components.host,
              let origin = URLOrigin(scheme: components.scheme ?? "https", host: host, port: components.port)
        else { return endpoint }
        return origin.string
    }
}
