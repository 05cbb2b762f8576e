import AccountStoreCore
import DequeModule
import Foundation
import HeapModule
import Logging

/// One timer for all accounts, however many there are, over two due-date books: this host's
/// heap, and (with a shared store) the store's schedule several hosts take from.
///
/// Sessions tell it when they are next due through the inbox (`note`), never awaiting it, so
/// that the order of an account's dates is the order of its changes. Each account has at most
/// one live entry (its latest date); superseded heap entries are skipped when they surface.
/// Refreshes are capped overall and per server (an authorization server, or an app password's
/// PDS), so that one slow server cannot take every slot. Due accounts leave the heap only when a
/// slot is free, most urgent first, so that after downtime the accounts closest to lapsing go
/// before those that can wait.
///
/// With a shared book, dates this host decides go to the store (the host that takes an
/// account then looks after it), and the heap holds only the accounts this host took and its
/// own timers (the save of rotated tokens only it holds).
actor RefreshScheduler {
    struct Entry: Comparable {
        var due: Date
        var id: UUID
        static func < (a: Entry, b: Entry) -> Bool { a.due < b.due }
    }

    typealias Upkeep = @Sendable (UUID, AccountSession.UpkeepCall) async -> Void
    typealias ServerID = UInt16

    /// An account is never dispatched again sooner than this after its last upkeep ended,
    /// whatever date it asks for: no failure can make the loop spin.
    static let minimumRedispatchInterval = AccountLifecycle.minimumUpkeepInterval

    /// An account's live due date in the heap (nil: none, or dispatched), the server it
    /// refreshes at, and whether it was taken from the shared book: in one table, since at
    /// 100,000 accounts every byte per account counts.
    struct Slot {
        var due: Date?
        var server: ServerID
        var taken = false
    }

    /// Where sessions' dates wait for the loop; never awaited.
    nonisolated let inbox: DueInbox
    private var queue = Heap<Entry>()
    /// A dense table, not a dictionary: at 1,000,000 accounts 40 bytes an account, not 67.
    private var slots = DenseTable<UUID, Slot>()
    /// Due entries whose server had no free slot, in the order they fell due.
    private var parked: [ServerID: Deque<Entry>] = [:]
    private var running = 0
    private var runningByServer: [ServerID: Int] = [:]
    /// When each running upkeep started (a handful at a time).
    private var runningSince: [UUID: Date] = [:]
    private var limits: RefreshLimits
    private let servers = ServerTable()
    private let now: @Sendable () -> Date
    /// When the loop last went round; the watchdog checks it.
    private(set) var lastTurn = Date()
    /// Liveness probes waiting for the loop's next turn.
    private var probes: [CheckedContinuation<Bool, Never>] = []
    private var isRunning = false
    /// The shared store's schedule; nil: the heap is the only book.
    private let shared: SharedDueWriter?
    /// Accounts taken from the shared book and not dispatched yet.
    private var takenWaiting = Set<UUID>()
    /// The shared book's earliest date, as last read.
    private var sharedNextDue: Date?

    init(limits: RefreshLimits, now: @escaping @Sendable () -> Date, shared: SharedDueWriter? = nil) {
        self.limits = limits
        self.now = now
        self.shared = shared
        self.inbox = DueInbox()
    }

    /// Where a session's due date goes: the inbox, which the loop drains on its next turn.
    nonisolated func note(_ id: UUID, _ due: AccountLifecycle.Due, server: String) {
        inbox.note(id, due, server: server)
    }

    /// Schedules `id` at `date` in this host's own book (tests, and callers outside a session).
    func schedule(_ id: UUID, at date: Date?, server: String? = nil) {
        var slot = slots[id] ?? Slot(due: nil, server: ServerTable.unknown)
        if let server { slot.server = servers.id(for: server) }
        slots[id] = slot
        place(id, at: date)
    }

    /// Knows an account's server without a date yet (it loads, or another host added it).
    func know(_ id: UUID, server: String) {
        if slots[id] == nil { slots[id] = Slot(due: nil, server: servers.id(for: server)) }
    }

    /// Takes in what sessions noted since the loop's last turn (at a stop, after the loop ended).
    func takeInNotedDates() { drainInbox() }

    /// One loaded account's first date, as a start hands it over.
    typealias FirstDate = (id: UUID, noted: DueInbox.Noted)

    /// A start's first dates, one per account it loaded, taken in at once: the slots in one
    /// pass and the heap built in one (Floyd's), where a million dates through the inbox were a
    /// dictionary of a million and a million heap inserts. Dates noted since are taken in after
    /// (`takeInNotedDates`), so that a later date wins as it does through the inbox.
    func takeIn(firstDates: [FirstDate]) {
        slots.reserveCapacity(slots.count + firstDates.count)
        var entries: [Entry] = []
        entries.reserveCapacity(firstDates.count)
        for first in firstDates {
            if let entry = takeIn(first.id, first.noted) { entries.append(entry) }
        }
        queue.insert(contentsOf: entries)
    }

    /// Takes in what sessions noted: a date this host decides goes to the shared book when
    /// there is one (the heap keeps only local timers and taken accounts), else to the heap.
    private func drainInbox() {
        let noted = inbox.drain()
        slots.reserveCapacity(slots.count + noted.count)
        for (id, noted) in noted {
            if let entry = takeIn(id, noted) { queue.insert(entry) }
        }
    }

    /// Takes in one noted date; returns the heap entry it needs, if any, for the caller to insert.
    private func takeIn(_ id: UUID, _ noted: DueInbox.Noted) -> Entry? {
        var slot = slots[id] ?? Slot(due: nil, server: ServerTable.unknown)
        slot.server = servers.id(for: noted.server)
        slots[id] = slot
        guard let shared, !noted.due.isLocal else { return placed(id, at: noted.due.date) }
        if noted.due.decidedHere { shared.note(ScheduledDate(id: id, due: noted.due.date, version: noted.due.version)) }
        if !takenWaiting.contains(id) { slots[id]?.due = nil }
        return nil
    }

    /// Puts `id` in the heap at `date` (nil: out of it), never within a second of its last
    /// upkeep's start while that runs.
    private func place(_ id: UUID, at date: Date?) {
        if let entry = placed(id, at: date) { queue.insert(entry) }
    }

    /// `place`'s bookkeeping: the slot's date set, and the heap entry it needs (nil: none).
    private func placed(_ id: UUID, at date: Date?) -> Entry? {
        guard var slot = slots[id] else { return nil }
        slot.due = date.map { date in runningSince[id].map { max(date, $0.addingTimeInterval(Self.minimumRedispatchInterval)) } ?? date }
        slots[id] = slot
        return slot.due.map { Entry(due: $0, id: id) }
    }

    /// How many more accounts this host may take from the shared book now (its free refresh
    /// slots, less those taken and waiting for a slot of a server that has room), and the
    /// servers whose slots are all in use: their accounts are left to other hosts, so that a
    /// server that stopped answering cannot use up what this host takes.
    func takeBudget() -> (room: Int, skipping: Set<String>) {
        let full = Set(runningByServer.filter { $0.value >= limits.perServer }.map(\.key))
        let waiting = takenWaiting.count(where: { slots[$0].map { !full.contains($0.server) } ?? false })
        return (max(0, limits.overall - running - waiting), Set(full.compactMap(servers.name(of:))))
    }

    /// Runs accounts taken from the shared book as soon as their servers have a free slot. An
    /// account this host does not know (yet) is left: it falls due again after the lease.
    func dispatchTaken(_ ids: [UUID]) {
        let current = now()
        for id in ids {
            guard var slot = slots[id], runningSince[id] == nil else { continue }
            slot.due = current
            slot.taken = true
            slots[id] = slot
            takenWaiting.insert(id)
            queue.insert(Entry(due: current, id: id))
        }
        if !ids.isEmpty { inbox.wake() }
    }

    func setSharedNextDue(_ date: Date?) { sharedNextDue = date }

    /// The next upkeep anywhere in the schedule, for status displays.
    func nextScheduled() -> Date? {
        drainInbox()
        return [nextDue(), sharedNextDue].compactMap { $0 }.min()
    }

    /// Forgets a removed account altogether.
    func remove(_ id: UUID) {
        slots[id] = nil
        takenWaiting.remove(id)
    }

    /// The earliest date in the heap; superseded entries on top are dropped on the way.
    func nextDue() -> Date? {
        while let top = queue.min {
            if slots[top.id]?.due == top.due { return top.due }
            queue.removeMin()
        }
        return nil
    }

    var refreshesRunning: Int { running }

    /// Changes how many refreshes may run at once (a reload); running ones are not stopped.
    func setLimits(_ new: RefreshLimits) {
        limits = new
        inbox.wake()
    }

    /// True once the loop has gone round after this call: proof for the watchdog that it is
    /// not stuck, rather than merely that the actor answers. False when the loop is not running.
    func probe() async -> Bool {
        guard isRunning else { return false }
        return await withCheckedContinuation { continuation in
            probes.append(continuation)
            inbox.wake()
        }
    }

    private func answerProbes(_ alive: Bool) {
        let waiting = probes
        probes = []
        waiting.forEach { $0.resume(returning: alive) }
    }

    /// Runs upkeeps as they fall due until cancelled.
    func run(upkeep: @escaping Upkeep) async {
        isRunning = true
        defer {
            isRunning = false
            answerProbes(false)
        }
        await withDiscardingTaskGroup { group in
            while !Task.isCancelled {
                lastTurn = now()
                answerProbes(true)
                drainInbox()
                while let (id, server, call) = nextDispatch() {
                    running += 1
                    runningByServer[server, default: 0] += 1
                    runningSince[id] = now()
                    group.addTask {
                        await upkeep(id, call)
                        await self.finished(id, server: server)
                    }
                }
                let deadline = running < limits.overall ? nextDue() : nil
                await inbox.sleep(until: deadline, now: now)
            }
        }
    }

    /// The next account to look after now, if a slot is free: parked accounts of servers with
    /// a free slot first (they fell due before anything left in the heap), then the heap.
    private func nextDispatch() -> (UUID, ServerID, AccountSession.UpkeepCall)? {
        guard running < limits.overall else { return nil }
        for (server, waiting) in parked where hasRoom(server) {
            var waiting = waiting
            while let entry = waiting.popFirst() {
                guard slots[entry.id]?.due == entry.due else { continue }  // superseded or removed
                parked[server] = waiting.isEmpty ? nil : waiting
                return dispatched(entry.id, server)
            }
            parked[server] = nil
        }
        let current = now()
        while let top = queue.min, top.due <= current {
            queue.removeMin()
            guard let slot = slots[top.id], slot.due == top.due else { continue }
            guard hasRoom(slot.server) else {
                parked[slot.server, default: []].append(top)
                continue
            }
            return dispatched(top.id, slot.server)
        }
        return nil
    }

    private func dispatched(_ id: UUID, _ server: ServerID) -> (UUID, ServerID, AccountSession.UpkeepCall) {
        let taken = slots[id]?.taken ?? false
        slots[id]?.due = nil
        slots[id]?.taken = false
        takenWaiting.remove(id)
        return (id, server, taken ? .taken : .due)
    }

    private func hasRoom(_ server: ServerID) -> Bool { runningByServer[server, default: 0] < limits.perServer }

    private func finished(_ id: UUID, server: ServerID) {
        running -= 1
        runningByServer[server, default: 1] -= 1
        if runningByServer[server] == 0 { runningByServer[server] = nil }
        runningSince[id] = nil
        // Whatever the upkeep asked for, not again within a second of its end.
        drainInbox()
        let earliest = now().addingTimeInterval(Self.minimumRedispatchInterval)
        if let due = slots[id]?.due, due < earliest { place(id, at: earliest) }
        inbox.wake()
    }
}
