import AccountStoreCore
import Foundation
import Synchronization
import Testing

/// A start's loading: every account once, in the order the store reads fastest, each page read
/// while the one before becomes sessions.
@Suite("Loading every account in the store's own order, one page ahead")
struct StoredOrderTests {
    @Test("every account comes once, whatever the page size, with accounts sharing a creation time and one removed",
          arguments: StoreBackend.allCases)
    func everyAccountOnce(_ backend: StoreBackend) async throws {
        try await backend.withStore { store in
            let base = Date(timeIntervalSinceReferenceDate: 800_000_000)
            // Ten share one creation time (a store written at once), the rest come in no order.
            let records = (0..<25).map { Fixtures.record(createdAt: $0 < 10 ? base : base.addingTimeInterval(Double(($0 * 7) % 13))) }
            try await store.insert(contentsOf: records.map { (record: $0, secrets: Fixtures.secrets()) })
            _ = try await store.delete(id: records[3].id)
            let expected = try await store.allAccounts()
            #expect(expected.count == 24)
            // 24 = 6 pages of 4 (the last page full: one empty read follows), 5 pages of 5 (the last partial).
            for pageSize in [1, 4, 5, 24, 100] {
                var seen: [AccountRecord] = []
                try await store.forEachAccountAsStored(pageSize: pageSize) { seen.append($0) }
                #expect(seen.count == expected.count, "page size \(pageSize): \(seen.count) accounts")
                #expect(Set(seen.map(\.id)) == Set(expected.map(\.id)), "page size \(pageSize)")
                #expect(seen.sorted { $0.id.uuidString < $1.id.uuidString } == expected.sorted { $0.id.uuidString < $1.id.uuidString },
                        "page size \(pageSize): each record read whole")
            }
        }
    }

    @Test("a failure while handling an account ends the walk there, with that error", arguments: StoreBackend.allCases)
    func bodyFailureEnds(_ backend: StoreBackend) async throws {
        struct Stop: Error, Equatable {}
        try await backend.withStore { store in
            try await store.insert(contentsOf: (0..<12).map { _ in (record: Fixtures.record(), secrets: Fixtures.secrets()) })
            var handled = 0
            await #expect(throws: Stop()) {
                try await store.forEachAccountAsStored(pageSize: 4) { _ in
                    handled += 1
                    if handled == 6 { throw Stop() }
                }
            }
            #expect(handled == 6, "no account handed over after the failure")
        }
    }

    // Read in turn, the test would wait for ever: the limit makes that a failure.
    @Test("the next page is read while the caller works through this one", .timeLimit(.minutes(1)))
    func readsAhead() async throws {
        let records = (0..<6).map { _ in Fixtures.record() }
        let (began, beganSignal) = AsyncStream.makeStream(of: Int.self)
        let reads = Mutex<[Int]>([])
        let read: @Sendable (Int?) async throws -> (page: [AccountRecord], next: Int?) = { start in
            let from = start ?? 0
            reads.withLock { $0.append(from) }
            beganSignal.yield(from)
            let end = min(from + 2, records.count)
            return (Array(records[from..<end]), end < records.count ? end : nil)
        }
        var handled: [UUID] = []
        var began2 = false
        var iterator = began.makeAsyncIterator()
        try await AccountPages.forEach(from: nil as Int?, read) { record in
            if handled.isEmpty {
                // Read in turn, the second page's read would begin only after this returns:
                // this wait would never end. One page ahead, it has begun (or begins now).
                _ = await iterator.next()  // the first page's read
                began2 = await iterator.next() == 2
            }
            handled.append(record.id)
        }
        #expect(began2, "the second page's read began while the first page was handled")
        #expect(handled == records.map(\.id))
        #expect(reads.withLock { $0 } == [0, 2, 4], "each page read once")
    }

    @Test("a page that cannot be read ends the walk with the store's error, after the pages before it")
    func readFailureEnds() async throws {
        let records = (0..<4).map { _ in Fixtures.record() }
        let read: @Sendable (Int?) async throws -> (page: [AccountRecord], next: Int?) = { start in
            guard start == nil else { throw StoreError.unreachable(location: "test", reason: "gone") }
            return (Array(records[0..<2]), 2)
        }
        var handled: [UUID] = []
        await #expect(throws: StoreError.self) {
            try await AccountPages.forEach(from: nil as Int?, read) { handled.append($0.id) }
        }
        #expect(handled == records[0..<2].map(\.id))
    }
}
