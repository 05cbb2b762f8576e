import DequeModule
import Foundation
import HeapModule
import Logging

/// The ordered refresh queue: one timer for all accounts, however many there are.
///
/// Each account has at most one live entry (its latest due date); superseded heap entries are
/// skipped when they surface. Due accounts wait in a FIFO while `maxConcurrent` refreshes run.
actor RefreshScheduler {
    struct Entry: Comparable {
        var due: Date
        var id: UUID
        static func < (a: Entry, b: Entry) -> Bool { a.due < b.due }
    }

    typealias RefreshAction = @Sendable (UUID) async -> Date?

    private var queue = Heap<Entry>()
    private var dueDates: [UUID: Date] = [:]
    private var ready = Deque<UUID>()
    private var running = 0
    private var maxConcurrent: Int
    private let now: @Sendable () -> Date
    private var wakeup: CheckedContinuation<Void, Never>?
    private var timer: Task<Void, Never>?
    /// When the loop last went round; the watchdog checks it.
    private(set) var lastTurn = Date()
    /// Liveness probes waiting for the loop's next turn.
    private var probes: [CheckedContinuation<Bool, Never>] = []
    private var isRunning = false

    init(maxConcurrent: Int, now: @escaping @Sendable () -> Date) {
        self.maxConcurrent = maxConcurrent
        self.now = now
    }

    /// Schedules (or reschedules) `id` at `date`; nil removes it from the schedule.
    func schedule(_ id: UUID, at date: Date?) {
        dueDates[id] = date
        guard let date else { return }
        queue.insert(Entry(due: date, id: id))
        if queue.min?.id == id { wake() }
    }

    /// The earliest scheduled refresh; superseded entries on top of the heap are dropped on the way.
    func nextDue() -> Date? {
        while let top = queue.min {
            if dueDates[top.id] == top.due { return top.due }
            queue.removeMin()
        }
        return nil
    }

    var refreshesRunning: Int { running }

    /// Changes how many refreshes may run at once (a reload); running ones are not stopped.
    func setMaxConcurrent(_ limit: Int) {
        precondition(limit > 0)
        maxConcurrent = limit
        wake()
    }

    /// True once the loop has gone round after this call: proof for the watchdog that it is
    /// not stuck, rather than merely that the actor answers. False when the loop is not running.
    func probe() async -> Bool {
        guard isRunning else { return false }
        return await withCheckedContinuation { continuation in
            probes.append(continuation)
            wake()
        }
    }

    private func answerProbes(_ alive: Bool) {
        let waiting = probes
        probes = []
        waiting.forEach { $0.resume(returning: alive) }
    }

    /// Runs refreshes as they fall due until cancelled. `refresh` returns the account's next due date.
    func run(refresh: @escaping RefreshAction) async {
        isRunning = true
        defer {
            isRunning = false
            answerProbes(false)
        }
        await withDiscardingTaskGroup { group in
            while !Task.isCancelled {
                lastTurn = now()
                answerProbes(true)
                moveDueEntriesToReady()
                while running < maxConcurrent, let id = ready.popFirst() {
                    running += 1
                    group.addTask {
                        let next = await refresh(id)
                        await self.finished(id, next: next)
                    }
                }
                await sleepUntilNextEvent()
            }
        }
    }

    private func moveDueEntriesToReady() {
        let current = now()
        while let top = queue.min, top.due <= current {
            queue.removeMin()
            guard dueDates[top.id] == top.due else { continue }  // superseded or removed
            dueDates[top.id] = nil
            ready.append(top.id)
        }
    }

    private func finished(_ id: UUID, next: Date?) {
        running -= 1
        // A reschedule that happened while the refresh ran wins over the action's answer.
        if dueDates[id] == nil { schedule(id, at: next) }
        wake()
    }

    private func sleepUntilNextEvent() async {
        let deadline = ready.isEmpty || running >= maxConcurrent ? queue.min?.due : now()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                if Task.isCancelled { return continuation.resume() }
                wakeup = continuation
                guard let deadline else { return }
                let delay = deadline.timeIntervalSince(now())
                timer = Task { [weak self] in
                    if delay > 0 { try? await Task.sleep(for: .seconds(delay)) }
                    await self?.wake()
                }
            }
        } onCancel: {
            Task { await self.wake() }
        }
    }

    private func wake() {
        timer?.cancel()
        timer = nil
        wakeup?.resume()
        wakeup = nil
    }
}
