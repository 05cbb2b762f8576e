import Foundation
import Logging
import Synchronization

/// Whether the store can be written, as the last write found it.
///
/// A full disk or a read-only state directory makes every write fail until space returns.
/// Each episode is logged once at error (when it starts) and once when it ends, however many
/// writes fail in between, and the status line shows it meanwhile.
public final class StoreHealth: Sendable {
    /// An episode of failing writes.
    public struct Outage: Sendable, Equatable {
        /// The first failure's reason, e.g. "database or disk is full".
        public var reason: String
        public var since: Date
        /// Writes that failed during the episode.
        public var failedWrites: Int
    }

    private struct State {
        var outage: Outage?
        /// A test's stand-in for a full disk: every write fails with this reason.
        package var injectedFault: String?
        var observer: (@Sendable (Outage?) -> Void)?
    }

    private let state = Mutex(State())
    private let logger: Logger

    package init(logger: Logger) {
        self.logger = logger
    }

    /// The episode in progress, or nil while writes succeed.
    public var outage: Outage? { state.withLock { $0.outage } }

    /// One line for users, e.g. "store unavailable: database or disk is full".
    public var problem: String? { outage.map { "store unavailable: \($0.reason)" } }

    package func recordFailure(_ reason: String, at now: Date = Date()) {
        let (started, observer) = state.withLock { state -> (Outage?, (@Sendable (Outage?) -> Void)?) in
            if state.outage == nil {
                state.outage = Outage(reason: reason, since: now, failedWrites: 1)
                return (state.outage, state.observer)
            }
            state.outage?.failedWrites += 1
            return (nil, nil)
        }
        if let started {
            observer?(started)
            logger.error("the account store cannot be written; refreshes wait until it can", metadata: [
                "reason": "\(reason)", "outcome": "store-unavailable",
            ])
        }
    }

    package func recordSuccess() {
        let (ended, observer) = state.withLock { state -> (Outage?, (@Sendable (Outage?) -> Void)?) in
            defer { state.outage = nil }
            return (state.outage, state.observer)
        }
        guard let ended else { return }
        observer?(nil)
        logger.notice("the account store can be written again", metadata: [
            "failedWrites": "\(ended.failedWrites)", "outcome": "store-available",
        ])
    }

    package var injectedFault: String? { state.withLock { $0.injectedFault } }

    /// Calls `observer` when an episode starts (with it) and when it ends (with nil).
    public func observe(_ observer: @escaping @Sendable (Outage?) -> Void) {
        state.withLock { $0.observer = observer }
    }

    /// Makes every write fail with `reason` (nil: writes work again). For tests of the
    /// failure paths where a real full disk cannot be arranged.
    @_spi(Testing) public func injectWriteFailures(_ reason: String?) {
        state.withLock { $0.injectedFault = reason }
    }
}
