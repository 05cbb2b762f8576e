import DequeModule
import Foundation
import HeapModule
import Logging

/// The ordered refresh queue: one timer for all accounts, however many there are.
///
/// Each account has at most one live entry (its latest due date); superseded heap entries are
/// skipped when they surface. Refreshes are capped overall and per server (an authorization
/// server, or an app password's PDS), so that one slow server cannot take every slot. Due
/// accounts leave the heap only when a slot is free, most urgent (earliest due) first, so that
/// after downtime the accounts closest to lapsing go before those that can wait.
///
/// With a shared store the schedule is the store's (`SharedRefreshSchedule`): dates go there
/// through `sharedDates`, and the heap holds only the accounts this host took from it.
actor RefreshScheduler {
    struct Entry: Comparable {
        var due: Date
        var id: UUID
        static func < (a: Entry, b: Entry) -> Bool { a.due < b.due }
    }

    typealias RefreshAction = @Sendable (UUID) async -> Date?
    typealias HostID = UInt16

    /// An account is never dispatched again sooner than this after its last refresh ended,
    /// whatever date it asks for: no failure can make the loop spin.
    static let minimumRedispatchInterval: TimeInterval = 1

    /// An account's live due date (nil: none, or dispatched) and the server it refreshes at,
    /// in one table: at 100,000 accounts every byte per account counts.
    struct Slot {
        var due: Date?
        var host: HostID
    }

    private var queue = Heap<Entry>()
    private var slots: [UUID: Slot] = [:]
    /// Due entries whose server had no free slot, in the order they fell due.
    private var parked: [HostID: Deque<Entry>] = [:]
    private var running = 0
    private var runningByHost: [HostID: Int] = [:]
    /// When each running refresh started (a handful at a time).
    private var runningSince: [UUID: Date] = [:]
    private var limits: RefreshLimits
    private let hosts = HostTable()
    private let now: @Sendable () -> Date
    private var wakeup: CheckedContinuation<Void, Never>?
    private var timer: Task<Void, Never>?
    /// When the loop last went round; the watchdog checks it.
    private(set) var lastTurn = Date()
    /// Liveness probes waiting for the loop's next turn.
    private var probes: [CheckedContinuation<Bool, Never>] = []
    private var isRunning = false
    /// Where due dates go when several hosts share the schedule; nil: it is this heap.
    private let sharedDates: SharedDueWriter?
    /// Accounts taken from the shared schedule and not dispatched yet.
    private var takenWaiting = Set<UUID>()
    /// The shared schedule's earliest date, as last read.
    private var sharedNextDue: Date?

    init(limits: RefreshLimits, now: @escaping @Sendable () -> Date, sharedDates: SharedDueWriter? = nil) {
        self.limits = limits
        self.now = now
        self.sharedDates = sharedDates
    }

    /// Schedules (or reschedules) `id` at `date`; nil removes it from the schedule. `host`
    /// names the server its refreshes go to (nil: unchanged).
    func schedule(_ id: UUID, at date: Date?, host: String? = nil) {
        var slot = slots[id] ?? Slot(due: nil, host: HostTable.unknown)
        if let host { slot.host = hosts.id(for: host) }
        if let sharedDates {
            slots[id] = slot
            // The same floor as below, from now: no answer makes any host spin on an account.
            sharedDates.note(id, due: date.map { max($0, now().addingTimeInterval(Self.minimumRedispatchInterval)) })
            return
        }
        if var date, let started = runningSince[id] {
            date = max(date, started.addingTimeInterval(Self.minimumRedispatchInterval))
            slot.due = date
        } else {
            slot.due = date
        }
        slots[id] = slot
        guard let due = slot.due else { return }
        queue.insert(Entry(due: due, id: id))
        if queue.min?.id == id { wake() }
    }

    /// Schedules many accounts in one go (start-up). With a shared schedule only their servers
    /// are noted: the store holds their dates already.
    func scheduleAll(_ plan: [(id: UUID, due: Date?, host: String)]) {
        slots.reserveCapacity(slots.count + plan.count)
        for entry in plan {
            if sharedDates != nil {
                know(entry.id, host: entry.host)
            } else {
                schedule(entry.id, at: entry.due, host: entry.host)
            }
        }
    }

    /// Knows an account (and its server) without scheduling it: another host added it to the
    /// shared schedule.
    func know(_ id: UUID, host: String) {
        if slots[id] == nil { slots[id] = Slot(due: nil, host: hosts.id(for: host)) }
    }

    /// How many more accounts this host may take from the shared schedule now: its free
    /// refresh slots, less those taken and not started yet.
    var roomForTaken: Int { max(0, limits.overall - running - takenWaiting.count) }

    /// Runs accounts taken from the shared schedule as soon as their servers have a free slot.
    /// An account this host does not know (yet) is left: it falls due again after the lease.
    func dispatchTaken(_ ids: [UUID]) {
        let current = now()
        for id in ids {
            guard var slot = slots[id], slot.due == nil, runningSince[id] == nil else { continue }
            slot.due = current
            slots[id] = slot
            takenWaiting.insert(id)
            queue.insert(Entry(due: current, id: id))
        }
        if !ids.isEmpty { wake() }
    }

    func setSharedNextDue(_ date: Date?) { sharedNextDue = date }

    /// The next refresh anywhere in the schedule, for status displays.
    func nextScheduled() -> Date? {
        [nextDue(), sharedNextDue].compactMap { $0 }.min()
    }

    /// Forgets a removed account altogether.
    func remove(_ id: UUID) {
        slots[id] = nil
        takenWaiting.remove(id)
    }

    private func due(_ id: UUID) -> Date? { slots[id]?.due }

    private func markDispatched(_ id: UUID) {
        slots[id]?.due = nil
        takenWaiting.remove(id)
    }

    /// The earliest scheduled refresh; superseded entries on top of the heap are dropped on the way.
    func nextDue() -> Date? {
        while let top = queue.min {
            if due(top.id) == top.due { return top.due }
            queue.removeMin()
        }
        return nil
    }

    var refreshesRunning: Int { running }

    /// Changes how many refreshes may run at once (a reload); running ones are not stopped.
    func setLimits(_ new: RefreshLimits) {
        limits = new
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
                while let (id, host) = nextDispatch() {
                    running += 1
                    runningByHost[host, default: 0] += 1
                    runningSince[id] = now()
                    group.addTask {
                        let next = await refresh(id)
                        await self.finished(id, host: host, next: next)
                    }
                }
                await sleepUntilNextEvent()
            }
        }
    }

    /// The next account to refresh now, if a slot is free: parked accounts of servers with a
    /// free slot first (they fell due before anything left in the heap), then the heap.
    private func nextDispatch() -> (UUID, HostID)? {
        guard running < limits.overall else { return nil }
        for (host, waiting) in parked where hasRoom(host) {
            var waiting = waiting
            while let entry = waiting.popFirst() {
                guard due(entry.id) == entry.due else { continue }  // superseded or removed
                parked[host] = waiting.isEmpty ? nil : waiting
                markDispatched(entry.id)
                return (entry.id, host)
            }
            parked[host] = nil
        }
        let current = now()
        while let top = queue.min, top.due <= current {
            queue.removeMin()
            guard let slot = slots[top.id], slot.due == top.due else { continue }
            guard hasRoom(slot.host) else {
                parked[slot.host, default: []].append(top)
                continue
            }
            markDispatched(top.id)
            return (top.id, slot.host)
        }
        return nil
    }

    private func hasRoom(_ host: HostID) -> Bool { runningByHost[host, default: 0] < limits.perHost }

    private func finished(_ id: UUID, host: HostID, next: Date?) {
        running -= 1
        runningByHost[host, default: 1] -= 1
        if runningByHost[host] == 0 { runningByHost[host] = nil }
        // A reschedule that happened while the refresh ran wins over the action's answer; an
        // account removed meanwhile has no slot and stays unscheduled.
        if slots[id] != nil, due(id) == nil { schedule(id, at: next) }
        let earliest = now().addingTimeInterval(Self.minimumRedispatchInterval)
        if let due = due(id), due < earliest { schedule(id, at: earliest) }
        runningSince[id] = nil
        wake()
    }

    private func sleepUntilNextEvent() async {
        let slotFree = running < limits.overall
        let deadline = slotFree ? nextDue() : nil
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
