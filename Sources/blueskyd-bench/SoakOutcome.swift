import Foundation
import JSONRPC
import NIOCore
import Synchronization

/// What became of one proxied call of the soak, from its reply line.
enum SoakOutcome: Sendable, Equatable {
    case succeeded
    /// A failure a refresh (or a token that was not refreshed in time) explains.
    case failedByRefresh(reason: String)
    case failedOtherwise(reason: String)

    /// JSON-RPC errors the daemon answers when a call needed a fresh token it could not get:
    /// during a refresh backoff (`UpstreamUnavailable`), or after a session ended (`NeedsLogin`).
    static let refreshErrorNames: Set<String> = ["UpstreamUnavailable", "NeedsLogin"]
    /// XRPC and DPoP errors of a PDS that was shown a stale token: the daemon let it reach the client.
    static let staleTokenErrors: Set<String> = ["ExpiredToken", "InvalidToken", "invalid_token"]

    /// Classifies a reply line; success is recognised without parsing the reply.
    static func classify(_ line: ByteBuffer) -> SoakOutcome {
        if ReplyCheck.isUpstreamOK(line) { return .succeeded }
        guard let reply = try? JSONValue.parse(line.readableBytesView) else {
            return .failedOtherwise(reason: "a reply that is not JSON")
        }
        if let error = reply["error"] {
            let name = error["data"]?["name"]?.stringValue ?? "code \(error["code"]?.intValue ?? 0)"
            return refreshErrorNames.contains(name) ? .failedByRefresh(reason: "JSON-RPC \(name)")
                : .failedOtherwise(reason: "JSON-RPC \(name)")
        }
        let status = reply["result"]?["status"]?.intValue ?? 0
        let body = reply["result"]?["body"]
        let errorName = body?["error"]?.stringValue ?? "no error name"
        let reason = "upstream \(status) \(errorName)"
        if (status == 401 || status == 400), staleTokenErrors.contains(errorName) { return .failedByRefresh(reason: reason) }
        return .failedOtherwise(reason: reason)
    }
}

/// The soak's running count of outcomes, shared by the event loops that complete the calls.
final class SoakTally: Sendable {
    struct Snapshot: Codable, Sendable {
        var sent = 0
        var succeeded = 0
        var failedByRefresh = 0
        var failedOtherwise = 0
        /// Calls not sent because too many were still waiting for their replies.
        var skippedBacklog = 0
        /// Failures by reason ("JSON-RPC UpstreamUnavailable", "upstream 401 ExpiredToken", …).
        var reasons: [String: Int] = [:]
        /// Call durations in milliseconds (send to reply), successful calls only.
        var latenciesMilliseconds: [Double] = []

        var completed: Int { succeeded + failedByRefresh + failedOtherwise }
    }

    private let state = Mutex(Snapshot())
    /// Calls sent and not yet answered.
    let inFlight = Atomic<Int>(0)

    func sent() {
        inFlight.add(1, ordering: .relaxed)
        state.withLock { $0.sent += 1 }
    }

    func skipped() { state.withLock { $0.skippedBacklog += 1 } }

    func record(_ outcome: SoakOutcome, milliseconds: Double) {
        inFlight.subtract(1, ordering: .relaxed)
        state.withLock { tally in
            switch outcome {
            case .succeeded:
                tally.succeeded += 1
                tally.latenciesMilliseconds.append(milliseconds)
            case .failedByRefresh(let reason):
                tally.failedByRefresh += 1
                tally.reasons[reason, default: 0] += 1
            case .failedOtherwise(let reason):
                tally.failedOtherwise += 1
                tally.reasons[reason, default: 0] += 1
            }
        }
    }

    var snapshot: Snapshot { state.withLock { $0 } }
}
