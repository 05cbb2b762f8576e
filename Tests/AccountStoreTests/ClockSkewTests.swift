import AccountStoreCore
import Foundation
@testable import PostgresStore
import Testing

/// Hosts compare leases by their own clocks: a host whose clock is far off the database's
/// would take other hosts' leases early, so it does not open the shared store.
@Suite("A host's clock against the database's")
struct ClockSkewTests {
    @Test("within a quarter of the lease a host opens the store; beyond it, the error says which way and what to do",
          arguments: [(0.0, false), (14.9, false), (-14.9, false), (15.1, true), (-90.0, true)])
    func verdict(skew: Double, refused: Bool) {
        let problem = PostgresAccountStore.clockProblem(skew: skew, leaseDuration: 60)
        #expect((problem != nil) == refused)
        if let problem {
            let text = "\(problem)"
            #expect(text.contains(skew > 0 ? "ahead of the database's" : "behind the database's"), "\(text)")
            #expect(text.contains("lease_seconds (60)") && text.contains("NTP"), "\(text)")
        }
    }
}
