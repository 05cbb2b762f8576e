import AccountStoreCore
import Foundation
import Logging
import Synchronization

extension PostgresAccountStore {
    /// How far this host's clock may be from the database's before it is warned about.
    static let tolerableClockSkew: TimeInterval = 1

    /// Leases are the database's clock's, but due dates and the dates stored with a refresh are
    /// each host's own: a host far ahead takes accounts from the shared schedule early (and
    /// refreshes them before they need it), one far behind leaves them late. So the hosts must
    /// agree within a small part of the lease, measured against the database's clock.
    /// - Throws: `StoreError.clockOff` when the clock is off by more than a quarter of
    ///   the lease.
    func checkClock() async throws(StoreError) {
        let before = Date()
        let server = try await read("reading the database's clock") { session in
            try await session.run("SELECT extract(epoch FROM clock_timestamp())::double precision").first?.decode(Double.self)
        }
        let after = Date()
        guard let server else { return }
        let skew = (before.timeIntervalSince1970 + after.timeIntervalSince1970) / 2 - server
        if let problem = Self.clockProblem(skew: skew, leaseDuration: settings.leaseDuration) { throw problem }
        if abs(skew) > Self.tolerableClockSkew {
            logger.warning("this host's clock is off the database's; keep the hosts' clocks synchronised (NTP)",
                           metadata: ["skewSeconds": "\(Self.rounded(skew))"])
        }
    }

    /// The error a clock `skew` seconds off the database's is, under leases of `leaseDuration`.
    static func clockProblem(skew: TimeInterval, leaseDuration: TimeInterval) -> StoreError? {
        guard abs(skew) > leaseDuration / 4 else { return nil }
        let direction = skew > 0 ? "ahead of" : "behind"
        return .clockOff("""
            this host's clock is \(rounded(abs(skew))) s \(direction) the database's, more than a quarter of \
            lease_seconds (\(Int(leaseDuration))): synchronise the hosts' clocks (NTP) before they share the store
            """)
    }

    private static func rounded(_ seconds: TimeInterval) -> Double { (seconds * 10).rounded() / 10 }
}

/// The clocks compared at every beat: a host whose clock drifts off the database's while it
/// runs is told, once when it starts and once when it ends. Leases are the database's clock's,
/// so a drift does not endanger tokens; the due dates a host writes are its own clock's, and
/// refresh earlier or later by the drift.
final class ClockWatch: Sendable {
    private let drifting = Mutex(false)

    func compare(skew: TimeInterval, leaseDuration: TimeInterval, logger: Logger) {
        let far = PostgresAccountStore.clockProblem(skew: skew, leaseDuration: leaseDuration)
        let changed = drifting.withLock { state -> Bool in
            defer { state = far != nil }
            return state != (far != nil)
        }
        guard changed else { return }
        if let far {
            logger.error("this host's clock drifted off the database's; synchronise it (NTP)", metadata: [
                "skewSeconds": "\(Int(skew.rounded()))", "problem": "\(far)"])
        } else {
            logger.notice("this host's clock agrees with the database's again")
        }
    }
}
