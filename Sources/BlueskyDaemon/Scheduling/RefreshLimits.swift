import Foundation

/// How many refreshes may run at once: overall, and against one server. The defaults carry
/// 100,000 OAuth accounts whose tokens all expire within 15 minutes through a token endpoint
/// that takes 100 ms (about 110 refreshes a second are needed; 16 at a time at one server
/// give 160), while a slow or failing server holds at most 16 of the 64 slots.
struct RefreshLimits: Sendable, Equatable {
    var overall: Int
    var perServer: Int

    static let `default` = RefreshLimits(overall: 64, perServer: 16)
}

/// Small numbers for server names, so that 100,000 accounts carry two bytes each, not a string.
final class ServerTable {
    static let unknown: RefreshScheduler.ServerID = 0
    private var ids: [String: RefreshScheduler.ServerID] = [:]
    private var names: [String] = []

    func id(for server: String) -> RefreshScheduler.ServerID {
        if let id = ids[server] { return id }
        // Past 65,534 servers, the rest share the last number (and its limit).
        let id = RefreshScheduler.ServerID(min(ids.count + 1, Int(RefreshScheduler.ServerID.max)))
        ids[server] = id
        if names.count < Int(id) { names.append(server) }
        return id
    }

    /// The name behind `id`; nil for the unknown server.
    func name(of id: RefreshScheduler.ServerID) -> String? {
        id == Self.unknown || Int(id) > names.count ? nil : names[Int(id) - 1]
    }
}
