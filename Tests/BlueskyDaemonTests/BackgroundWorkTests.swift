@testable import BlueskyDaemon
import Foundation
import Synchronization
import Testing

@Suite("Background work: a few of a kind at a time, every task ended before stop returns", .timeLimit(.minutes(1)))
struct BackgroundWorkTests {
    @Test("at most a kind's limit run at once; other kinds are not held up; stop cancels and waits, then refuses")
    func limitAndStop() async {
        let work = BackgroundWork()
        let started = Atomic(0)
        let finished = Atomic(0)
        let body: @Sendable () async -> Void = {
            started.add(1, ordering: .relaxed)
            // Runs until cancelled: stop() must cancel it to return.
            while !Task.isCancelled { await Task.yield() }
            finished.add(1, ordering: .relaxed)
        }
        for _ in 0..<BackgroundWork.Kind.identityCheck.limit { #expect(work.start(.identityCheck, body)) }
        #expect(!work.start(.identityCheck, body), "one more waits for a later turn")
        for _ in 0..<BackgroundWork.Kind.nonceSave.limit { #expect(work.start(.nonceSave, body), "another kind has its own limit") }
        #expect(!work.start(.nonceSave, body))
        #expect(work.running == BackgroundWork.Kind.identityCheck.limit + BackgroundWork.Kind.nonceSave.limit)
        await work.stop()
        #expect(work.running == 0)
        #expect(finished.load(ordering: .relaxed) == started.load(ordering: .relaxed), "every task ended before stop returned")
        #expect(!work.start(.profileFetch, body), "nothing starts once stopping")
    }
}
