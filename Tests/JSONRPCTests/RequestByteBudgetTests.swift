import Foundation
@testable import RPCServer
import Testing

@Suite("The shared budget of buffered request bytes")
struct RequestByteBudgetTests {
    @Test("first come, first served; a cancelled waiter takes nothing and lets those behind it in")
    func fairnessAndCancellation() async throws {
        let budget = RequestByteBudget(capacity: 100)
        #expect(await budget.acquire(80))
        let big = Task { await budget.acquire(60) }
        try await waitUntil { budget.usage.waiting == 1 }
        let small = Task { await budget.acquire(10) }
        try await waitUntil { budget.usage.waiting == 2 }
        #expect(budget.usage.inUse == 80, "the small one fits but waits behind the big one")

        big.cancel()
        #expect(await big.value == false, "cancelled while waiting")
        #expect(await small.value == true, "admitted once the big one gave up its place")
        #expect(budget.usage.inUse == 90 && budget.usage.waiting == 0)

        budget.release(80)
        budget.release(10)
        #expect(budget.usage.inUse == 0)
        #expect(await budget.acquire(1_000), "a line larger than the budget counts as the whole budget")
        #expect(budget.usage.inUse == 100)
        budget.release(1_000)
        #expect(budget.usage.inUse == 0)
    }

    private func waitUntil(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(2)) }
        try #require(condition())
    }
}
