import Foundation
import NIOCore
import Testing
@testable import PostgresStore

/// Which failures say the database is unreachable (and open the store's breaker, reported as
/// an outage): a caller that gave up says nothing about the database.
@Suite("PostgreSQL errors: outage or not")
struct PostgresErrorTests {
    @Test("a cancelled wait (a stop ending background work) is no outage; a deadline or a lost connection is")
    func cancellationIsNoOutage() {
        #expect(!PostgresErrorText.isConnectionLoss(CancellationError()))
        #expect(PostgresErrorText.isConnectionLoss(PostgresDeadlineExceeded()))
        #expect(PostgresErrorText.isConnectionLoss(ChannelError.ioOnClosedChannel))
    }
}
