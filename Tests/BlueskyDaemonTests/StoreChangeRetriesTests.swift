import BlueskyStore
import BlueskyTesting
import Foundation
import Synchronization
import Testing
@testable import BlueskyDaemon

/// Another host's change this host could not read (its store call failed while the listening
/// connection stayed up) is read again with backoff, not dropped.
@Suite("Store changes that could not be read are tried again")
struct StoreChangeRetriesTests {
    static let quick = Backoff(initial: .milliseconds(5), maximum: .milliseconds(40))

    /// Runs `retries` with an `apply` that fails `failures[change]` times per change, then
    /// succeeds; returns the attempts once `done` holds for them (or after 10 s).
    static func attempts(_ retries: StoreChangeRetries, failures: [StoreChange: Int], feed: () async -> Void,
                         until done: @escaping @Sendable ([StoreChange]) -> Bool) async -> [StoreChange] {
        let log = Mutex<[StoreChange]>([])
        let remaining = Mutex(failures)
        let runner = Task {
            await retries.run(backoff: quick) { change in
                log.withLock { $0.append(change) }
                return remaining.withLock { counts in
                    guard let left = counts[change], left > 0 else { return true }
                    counts[change] = left - 1
                    return false
                }
            }
        }
        await feed()
        _ = await eventually(timeout: .seconds(10)) { done(log.withLock { $0 }) }
        runner.cancel()
        await runner.value
        return log.withLock { $0 }
    }

    @Test("a change whose read fails twice is applied on the third try, once it succeeds")
    func retriedUntilRead() async {
        let retries = StoreChangeRetries()
        let id = UUID()
        let log = await Self.attempts(retries, failures: [.account(id): 2], feed: { await retries.add(.account(id)) },
                                      until: { $0.count >= 3 })
        #expect(log == [.account(id), .account(id), .account(id)])
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
}
