import Foundation
import Synchronization

/// The testbed's "now": wall time plus an offset tests can advance, so token expiry and grace
/// periods can be simulated without sleeping.
final class TestbedClock: Sendable {
    private let offset = Mutex<Duration>(.zero)

    func now() -> Date {
        Date().addingTimeInterval(offset.withLock { $0 }.seconds)
    }

    func advance(by duration: Duration) {
        offset.withLock { $0 += duration }
    }
}
