import AccountStoreCore
import Foundation
import Logging
import Synchronization
import WebBasics

/// Carries this host's scheduling decisions (when an account is next due) into the shared
/// schedule, in batches and off the scheduler: the scheduler notes a date and goes on, a
/// background loop writes what has piled up. A later date for the same account replaces an
/// earlier one not yet written; a failed write is tried again with backoff, keeping dates
/// noted meanwhile. Each date is fenced on the tokens' version it was decided for.
///
/// A date lost with this host (it died before writing it) costs nothing: an account taken
/// from the schedule stays hidden only until its lease ends, then falls due again.
final class SharedDueWriter: Sendable {
    private let pending = Mutex<[UUID: ScheduledDate]>([:])
    private let signal = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))

    /// Notes when an account is next due; the write follows shortly.
    func note(_ date: ScheduledDate) {
        pending.withLock { $0[date.id] = date }
        signal.continuation.yield()
    }

    /// Writes noted dates as they come until cancelled, then once more (a stop).
    func run(schedule: any SharedRefreshSchedule, logger: Logger) async {
        for await _ in signal.stream {
            var attempt = 0
            while await !flush(schedule, logger: logger) {
                guard !Task.isCancelled else { return }
                attempt += 1
                try? await Task.sleep(for: .seconds(Backoff.storeRetry.delay(attempt: attempt)))
            }
        }
        await flush(schedule, logger: logger)
    }

    func stop() { signal.continuation.finish() }

    /// Writes what is pending (once more at a stop, after the last refresh ended); false
    /// (dates kept) when the store refused.
    @discardableResult
    func flush(_ schedule: any SharedRefreshSchedule, logger: Logger) async -> Bool {
        let batch = pending.withLock { noted in
            defer { noted = [:] }
            return noted
        }
        guard !batch.isEmpty else { return true }
        do {
            try await schedule.setRefreshDue(Array(batch.values))
            return true
        } catch {
            // Dates noted since the batch was taken are newer: they stay as they are.
            pending.withLock { noted in noted.merge(batch) { newer, _ in newer } }
            logger.warning("cannot record due dates in the shared schedule; trying again", metadata: [
                "accounts": "\(batch.count)", "error": "\(error)",
            ])
            return false
        }
    }
}
