@testable import BlueskyDaemon
import Foundation
import Synchronization
import Testing

@Suite("Background checks: a few at a time, none after stop")
struct BackgroundChecksTests {
    @Test("at most `limit` run at once; stop cancels and waits for them, then refuses new ones")
    func limitAndStop() async {
        let checks = BackgroundChecks(limit: 2)
        let started = Atomic(0)
        let finished = Atomic(0)
        let body: @Sendable () async -> Void = {
            started.add(1, ordering: .relaxed)
            // Runs until cancelled: stop() must cancel it to return.
            while !Task.isCancelled { await Task.yield() }
            finished.add(1, ordering: .relaxed)
        }
        #expect(checks.start(body))
        #expect(checks.start(body))
        #expect(!checks.start(body), "a third waits for a later turn")
        await checks.stop()
        #expect(finished.load(ordering: .relaxed) == started.load(ordering: .relaxed))
        #expect(finished.load(ordering: .relaxed) <= 2)
        #expect(!checks.start(body), "nothing starts once stopping")
    }
}
