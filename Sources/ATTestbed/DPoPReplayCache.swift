import Foundation
import Synchronization

/// The `jti` values seen recently, so each proof is accepted once.
///
/// A `jti` only needs remembering while its proof could still pass the `iat` check; after that
/// the age check refuses it anyway. Entries therefore expire, and the count is capped so a flood
/// of proofs cannot grow memory without bound: past the cap the oldest entry goes first.
public final class DPoPReplayCache: Sendable {
    public let capacity: Int

    private struct State {
        var expiries: [String: Date] = [:]
        /// Insertion order, for pruning from the front (proofs arrive in roughly `iat` order).
        var order: [(jti: String, expiry: Date)] = []
        var head = 0
    }

    private let state = Mutex(State())

    public init(capacity: Int = 100_000) {
        precondition(capacity > 0)
        self.capacity = capacity
    }

    /// Records `jti` until `expiry`; false when it is already recorded and not yet expired.
    public func insertIfUnseen(_ jti: String, expiry: Date, now: Date) -> Bool {
        state.withLock { state in
            Self.prune(&state, now: now)
            if let existing = state.expiries[jti], existing > now { return false }
            while state.expiries.count >= capacity, state.head < state.order.count {
                Self.dropOldest(&state)
            }
            state.expiries[jti] = expiry
            state.order.append((jti, expiry))
            return true
        }
    }

    /// How many `jti` values are remembered.
    public var count: Int { state.withLock { $0.expiries.count } }

    private static func prune(_ state: inout State, now: Date) {
        while state.head < state.order.count, state.order[state.head].expiry <= now {
            dropOldest(&state)
        }
        // Compact the queue now and then instead of removing from the front each time.
        if state.head > 1024, state.head * 2 > state.order.count {
            state.order.removeFirst(state.head)
            state.head = 0
        }
    }

    private static func dropOldest(_ state: inout State) {
        let (jti, expiry) = state.order[state.head]
        state.head += 1
        // The same jti may have been re-inserted after expiring; drop only this generation.
        if state.expiries[jti] == expiry { state.expiries[jti] = nil }
    }
}
