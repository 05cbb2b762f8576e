import Foundation
import Synchronization

/// Sessions' due dates on their way to the scheduler, and the scheduler loop's alarm clock.
///
/// A session tells its date without awaiting anything (its state and the date it tells then
/// arrive in the same order, whatever else the scheduler is doing); the latest date per account
/// wins. The loop drains them on every turn, and sleeps until the next due date or a wake-up.
final class DueInbox: Sendable {
    struct Noted: Sendable {
        var due: AccountLifecycle.Due
        var server: String
    }

    private struct State {
        var pending: [UUID: Noted] = [:]
        var sleeper: CheckedContinuation<Void, Never>?
        /// A wake-up came while the loop was not asleep: its next sleep returns at once.
        var woken = false

        /// The sleeper to resume, or (none asleep) a note that the next sleep is cut short.
        mutating func wakeLocked() -> CheckedContinuation<Void, Never>? {
            guard let sleeper else {
                woken = true
                return nil
            }
            self.sleeper = nil
            return sleeper
        }
    }

    private let state = Mutex(State())

    func note(_ id: UUID, _ due: AccountLifecycle.Due, server: String) {
        let sleeper = state.withLock { state in
            state.pending[id] = Noted(due: due, server: server)
            return state.wakeLocked()
        }
        sleeper?.resume()
    }

    func drain() -> [UUID: Noted] {
        state.withLock { state in
            defer { state.pending = [:] }
            return state.pending
        }
    }

    /// Ends the loop's current (or next) sleep.
    func wake() {
        state.withLock { $0.wakeLocked() }?.resume()
    }

    /// Sleeps until `deadline` (nil: until woken) or a wake-up, whichever comes first.
    func sleep(until deadline: Date?, now: @Sendable () -> Date) async {
        let delay = deadline.map { max(0, $0.timeIntervalSince(now())) }
        await withTaskGroup(of: Void.self) { group in
            if let delay {
                group.addTask {
                    guard (try? await Task.sleep(for: .seconds(delay))) != nil else { return }
                    self.wake()
                }
            }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let immediately = state.withLock { state -> Bool in
                        if state.woken || Task.isCancelled {
                            state.woken = false
                            return true
                        }
                        state.sleeper = continuation
                        return false
                    }
                    if immediately { continuation.resume() }
                }
            } onCancel: {
                self.wake()
            }
            group.cancelAll()
        }
    }
}
