import AccountStoreCore
import Foundation
import Synchronization
import Testing
import WebBasics
@testable import BlueskyDaemon

/// Another host's change this host could not read (its store call failed while the listening
/// connection stayed up) is read again with backoff, not dropped.
@Suite("Store changes that could not be read are tried again")
struct StoreChangeRetriesTests {
    static let quick = Backoff(initial: .milliseconds(5), maximum: .milliseconds(40))

    @Test("a change whose read fails twice is applied on the third try, once it succeeds", .timeLimit(.minutes(1)))
    func retriedUntilRead() async {
        let retries = StoreChangeRetries()
        let id = UUID()
        let failuresLeft = Mutex(2)
        // Each attempt is heard as it happens: no wall-clock wait that a loaded machine could outlast.
        let (attempts, attempt) = AsyncStream.makeStream(of: StoreChange.self)
        let runner = Task {
            await retries.run(backoff: Self.quick) { change in
                attempt.yield(change)
                return failuresLeft.withLock { left in
                    defer { left -= 1 }
                    return left <= 0
                }
            }
        }
        await retries.add(.account(id))
        var seen: [StoreChange] = []
        for await change in attempts {
            seen.append(change)
            if seen.count == 3 { break }
        }
        runner.cancel()
        await runner.value
        #expect(seen == [.account(id), .account(id), .account(id)])
        #expect(await retries.isEmpty)
    }

    @Test("repeats of one account fold into one read; past the limit, one full read replaces them")
    func folding() async {
        let folded = StoreChangeRetries(limit: 3)
        let (id, other) = (UUID(), UUID())
        await folded.add(.account(id))
        await folded.add(.account(id))
        await folded.add(.account(other))
        #expect(Set(await folded.takeAll()) == [.account(id), .account(other)])
        #expect(await folded.isEmpty, "what was taken is forgotten")

        let overflowing = StoreChangeRetries(limit: 3)
        for _ in 0..<4 { await overflowing.add(.account(UUID())) }
        await overflowing.add(.account(UUID()))
        #expect(await overflowing.takeAll() == [.everything])
    }

    @Test("""
        the listener's changes are a fold, not a queue: a flood of one account's announcement (a replayed payload) is \
        one read, a flood of distinct accounts one full read, and the wake-ups fold too
        """)
    func inboxFoldsFloods() async {
        let inbox = StoreChangeInbox(limit: 100)
        let id = UUID()
        for _ in 0..<100_000 { inbox.add(.account(id)) }
        var wakes = inbox.wakes.makeAsyncIterator()
        #expect(await wakes.next() != nil)
        #expect(inbox.takeAll() == [.account(id)])
        #expect(inbox.takeAll().isEmpty, "taken once")
        for _ in 0..<100_000 { inbox.add(.account(UUID())) }
        #expect(inbox.takeAll() == [.everything])
        // One wake-up waits for all 100,000 adds, not 100,000 of them.
        inbox.add(.account(id))
        #expect(await wakes.next() != nil)
        #expect(inbox.takeAll() == [.account(id)])
    }
}
