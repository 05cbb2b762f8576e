import AccountStoreCore
import BlueskyTesting
import Crypto
import Foundation
import PostgresStore
import Testing

/// The refresh schedule several hosts share: due dates in the store, taken with SKIP LOCKED.
@Suite("The shared refresh schedule")
struct SharedScheduleTests {
    @Test("an added account is due at once; a needs-login one never; dates recorded by one host are the other's")
    func dueDates() async throws {
        try await SharedTestDatabase.withTwoHosts { (a, b) async throws in
            let added = Fixtures.record(createdAt: Date(timeIntervalSinceNow: -5))
            let secrets = Fixtures.secrets()
            try await a.insert(added, secrets: secrets)
            var waiting = Fixtures.record()
            waiting.state = .needsLogin
            try await a.insert(waiting, secrets: Fixtures.secrets())
            // The account comes back as stored, its seal checked, with its secrets: the host needs
            // no read of its own.
            let taken = try await b.takeDueRefreshes(limit: 10, at: Date(), skipping: [])
            #expect(taken.map(\.record.id) == [added.id])
            #expect(taken.first.map { $0.record.did == added.did && $0.record.secretsVersion == 1 && !$0.record.isAltered } == true)
            #expect(taken.first?.record == (try await b.account(id: added.id)), "the same record a read gives")
            #expect(taken.first?.secrets == secrets, "the secrets stored with it")
            let later = Date(timeIntervalSinceNow: 3600)
            try await a.setRefreshDue([ScheduledDate(id: added.id, due: later, version: 1), ScheduledDate(id: UUID(), due: Date(), version: 1)])
            #expect(try await b.nextRefreshDue() == later, "an unknown account in the batch is skipped")
            #expect(try await b.takeDueRefreshes(limit: 10, at: Date(), skipping: []).isEmpty)
            try await a.setRefreshDue([ScheduledDate(id: added.id, due: nil, version: 1)])
            #expect(try await b.nextRefreshDue() == nil)
            #expect(try await b.takeDueRefreshes(limit: 10, at: Date().addingTimeInterval(7200), skipping: []).isEmpty)
        }
    }

    @Test("two hosts taking 500 due accounts at once take each exactly once; one not rescheduled falls due again after the lease")
    func takingSpreads() async throws {
        try await SharedTestDatabase.withTwoHosts { (a, b) async throws in
            let now = Date()
            let records = (0..<500).map { _ in Fixtures.record(createdAt: now.addingTimeInterval(-60)) }
            try await a.insert(contentsOf: records.map { ($0, Fixtures.secrets()) })
            let taken = try await withThrowingTaskGroup(of: [UUID].self) { group in
                for round in 0..<20 {
                    let store = round.isMultiple(of: 2) ? a : b
                    group.addTask { try await store.takeDueRefreshes(limit: 40, at: now, skipping: []).map(\.record.id) }
                }
                return try await group.reduce(into: [UUID]()) { $0 += $1 }
            }
            #expect(taken.count == 500 && Set(taken) == Set(records.map(\.id)), "every account once, none twice")
            #expect(try await a.takeDueRefreshes(limit: 1000, at: now.addingTimeInterval(59), skipping: []).isEmpty, "held until the lease ends")
            let next = try #require(try await a.nextRefreshDue())
            #expect(abs(next.timeIntervalSince(now.addingTimeInterval(60))) < 0.001)
            // Host B records the real dates of all but one; that one (a host died) is due again.
            try await b.setRefreshDue(records.dropFirst().map { ScheduledDate(id: $0.id, due: now.addingTimeInterval(3600), version: 1) })
            #expect(try await a.takeDueRefreshes(limit: 1000, at: now.addingTimeInterval(61), skipping: []).map(\.record.id) == [records[0].id])
        }
    }

    @Test("two hosts writing overlapping batches of dates in opposite orders at once: both go through, no deadlock")
    func overlappingWrites() async throws {
        try await SharedTestDatabase.withTwoHosts { (a, b) async throws in
            let records = (0..<2_000).map { _ in Fixtures.record() }
            try await a.insert(contentsOf: records.map { ($0, Fixtures.secrets()) })
            let later = Date(timeIntervalSinceNow: 3600)
            for round in 0..<10 {
                let forward = records.map { ScheduledDate(id: $0.id, due: later.addingTimeInterval(Double(round)), version: 1) }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await a.setRefreshDue(forward) }
                    group.addTask { try await b.setRefreshDue(forward.reversed()) }
                    try await group.waitForAll()
                }
            }
            #expect(try await a.nextRefreshDue() == later.addingTimeInterval(9))
        }
    }

    @Test("a taken row whose secrets do not open here is still taken, without them: its refresh reads them and meets the reason")
    func secretsThatDoNotOpen() async throws {
        try await SharedTestDatabase.withTwoHosts { (a, b) async throws in
            let (swapped, other) = (Fixtures.record(createdAt: Date(timeIntervalSinceNow: -5)), Fixtures.record())
            try await a.insert(swapped, secrets: Fixtures.secrets())
            try await a.insert(other, secrets: Fixtures.secrets())
            try await a.setRefreshDue([ScheduledDate(id: other.id, due: Date(timeIntervalSinceNow: 3600), version: 1)])
            // Another row's sealed secrets, which are bound to that row's id.
            _ = try await SharedTestDatabase.server.run("""
                UPDATE account SET sealed_secrets = (SELECT sealed_secrets FROM account WHERE did = '\(other.did)')
                WHERE did = '\(swapped.did)'
                """)
            let taken = try await b.takeDueRefreshes(limit: 10, at: Date(), skipping: [])
            #expect(taken.map(\.record.id) == [swapped.id] && taken.first?.secrets == nil)
            await #expect(throws: StoreError.secretDoesNotOpen(account: swapped.id)) { try await b.secrets(for: swapped.id) }
        }
    }
}
