import BlueskyTesting
import Synchronization
import Testing
@testable import PostgresStore

/// postgres-nio may never resume a LISTEN or a statement on a connection the server closed
/// (vapor/postgres-nio#601). The store's deadlines must end their caller all the same.
@Suite("A deadline that does not wait for an operation that never ends", .timeLimit(.minutes(1)))
struct FirstToEndTests {
    @Test("an operation that ignores cancellation and never ends: the deadline still ends the call, and says so")
    func leakedOperation() async throws {
        let leak = NeverResumed()
        let expired = Mutex<Duration?>(nil)
        let started = ContinuousClock.now
        await #expect(throws: PostgresDeadlineExceeded.self) {
            try await withDeadline(.milliseconds(200)) {
                await leak.wait()
            } onExpiry: { deadline in
                expired.withLock { $0 = deadline }
            }
        }
        #expect(ContinuousClock.now - started < .seconds(20))
        #expect(expired.withLock { $0 } == .milliseconds(200))
    }

    @Test("the first to end decides, whether it returned or threw; the others are cancelled")
    func firstDecides() async throws {
        let slowWasCancelled = Mutex(false)
        let slow: @Sendable () async throws -> Int = {
            do {
                try await Task.sleep(for: .seconds(30))
            } catch {
                slowWasCancelled.withLock { $0 = true }
                throw error
            }
            return 2
        }
        #expect(try await firstToEnd({ 1 }, slow) == 1)
        await #expect(throws: PostgresDeadlineExceeded.self) {
            try await firstToEnd({ throw PostgresDeadlineExceeded() }, slow)
        }
        let cancelled = await eventually(timeout: .seconds(10)) { slowWasCancelled.withLock { $0 } }
        #expect(cancelled)
    }

    @Test("a caller cancelled while every operation hangs is released at once")
    func callerCancelled() async throws {
        let leak = NeverResumed()
        let call = Task { try await firstToEnd({ await leak.wait() }, { await leak.wait() }) }
        call.cancel()
        await #expect(throws: CancellationError.self) { try await call.value }
    }
}

/// A wait nobody ends and that ignores cancellation: what a leaked continuation looks like to
/// its caller. The continuations are kept, as a leaked one is, so no misuse warning is printed.
private final class NeverResumed: Sendable {
    private let waiting = Mutex<[CheckedContinuation<Void, Never>]>([])

    func wait() async {
        await withCheckedContinuation { continuation in waiting.withLock { $0.append(continuation) } }
    }
}
