import AccountStoreCore
import BlueskyTesting
import DaemonHarness
import Foundation
import Testing
@testable import PostgresStore

/// A host's clean stop ends its liveness for good, whatever beat of its lands afterwards.
@Suite("A stopped host stays stopped", .timeLimit(.minutes(2)))
struct LateBeatTests {
    @Test("a beat in flight when the host closed, landing after its stop, does not make it alive again")
    func lateBeatAfterStop() async throws {
        let server = try await SharedTestDatabase.server
        try await SharedTestDatabase.withTwoHosts(leaseDuration: 2) { a, _ in
            let record = Fixtures.record()
            try await a.insert(record, secrets: Fixtures.secrets())
            #expect(try await a.claimRefresh(id: record.id, expecting: 1, at: Date()) == .granted(interruptedAt: nil))
            // close()'s write, then the beat that was in flight on A's listening connection.
            let connection = try await PostgresConnections.dedicatedConnection(a.settings, id: 9, logger: a.logger)
            await a.forgetLiveness()
            _ = try await a.heartbeat(on: connection, keeping: [])
            try await connection.close()
            let alive = try await server.run("""
                SELECT count(*) FROM blueskyd_host WHERE owner = '\(a.leaseOwner)'
                AND alive_until > extract(epoch FROM clock_timestamp()) - 978307200
                """, database: SharedTestDatabase.database)
            #expect(alive.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "A counts as alive: \(alive)")
        }
    }
}
