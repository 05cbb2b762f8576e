import BlueskyStore
import Foundation

extension PostgresAccountStore {
    /// How far this host's clock may be from the database's before it is warned about.
    static let tolerableClockSkew: TimeInterval = 1

    /// Leases and due dates are written and compared by each host's own clock, so the hosts
    /// must agree within a small part of the lease: a host running ahead would take other
    /// hosts' leases early. Measured against the database's clock, which all hosts share.
    /// - Throws: `StoreError.invalidSetting` when the clock is off by more than a quarter of
    ///   the lease.
    func checkClock() throws {
        let before = Date()
        let server = try read("reading the database's clock") { session in
            try session.run("SELECT extract(epoch FROM clock_timestamp())::double precision").rows.first?.decode(Double.self)
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
        return .invalidSetting("""
            this host's clock is \(rounded(abs(skew))) s \(direction) the database's, more than a quarter of \
            lease_seconds (\(Int(leaseDuration))): synchronise the hosts' clocks (NTP) before they share the store
            """)
    }

    private static func rounded(_ seconds: TimeInterval) -> Double { (seconds * 10).rounded() / 10 }
}
