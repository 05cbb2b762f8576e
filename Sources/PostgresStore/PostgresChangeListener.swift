import AccountStoreCore
import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization
import WebBasics

/// Hears the other hosts' changes: one connection of its own (with TCP keepalive) that LISTENs
/// on the store's channel (one per key this host holds: during a rekey while hosts run, a host
/// holding both keys hears hosts on either), runs `check` (this host's heartbeat) every `checkInterval`, which
/// must answer within `checkDeadline`, and comes back (with backoff, never longer than half a
/// check interval, so that a host's liveness outlasts an outage) when it is lost.
/// Notifications sent while it was away are gone, so each reconnection reports `.everything`.
///
/// A connection that died without a reset (a NAT that forgot it, a database host that lost
/// power) answers nothing and is closed by the failed check: it is found within
/// `checkInterval + checkDeadline`, not never.
final class PostgresChangeListener: Sendable {
    private struct State {
        var loop: Task<Void, Never>?
        var stopped = false
    }

    private let settings: PostgresStoreSettings
    private let signers: [ChangeSigner]
    private let owner: String
    /// Payloads on the channel that were not a host of this tenant's (their MAC fails).
    private let forged = Mutex(ForgedPayloads())
    private let logger: Logger
    private let state = Mutex(State())
    let checkInterval: Duration
    let checkDeadline: Duration
    private let reconnect: Backoff

    init(settings: PostgresStoreSettings, signers: [ChangeSigner], owner: String, logger: Logger,
         checkInterval: Duration = .seconds(10), checkDeadline: Duration = .seconds(5)) {
        self.settings = settings
        self.signers = signers
        self.owner = owner
        self.logger = logger
        self.checkInterval = checkInterval
        self.checkDeadline = min(checkDeadline, checkInterval)
        reconnect = Backoff(initial: .milliseconds(500), maximum: max(.milliseconds(500), checkInterval / 2))
    }

    /// Starts listening. The first LISTEN is in place when this returns (when the database is
    /// reachable within the check deadline), so a change committed after it is heard; when it
    /// is not, the reconnection that follows reports `.everything`.
    /// - Parameter check: run on the connection every `checkInterval` (this host's heartbeat);
    ///   one that fails or does not answer in time ends the connection.
    func start(_ handler: @escaping @Sendable (StoreChange) -> Void,
               check: @escaping @Sendable (PostgresConnection) async throws -> Void) async {
        let (listening, signal) = AsyncStream.makeStream(of: Void.self)
        let loop = Task { [self] in await keepListening(handler, check: check, firstListening: signal) }
        state.withLock { $0.loop = loop }
        // Returns at the first LISTEN, or when the first attempt failed (the loop then retries).
        for await _ in listening { break }
    }

    func stop() async {
        let loop = state.withLock { state in
            state.stopped = true
            return state.loop
        }
        loop?.cancel()
        await loop?.value
    }

    private var stopped: Bool { state.withLock { $0.stopped } }

    private func keepListening(_ handler: @escaping @Sendable (StoreChange) -> Void,
                               check: @escaping @Sendable (PostgresConnection) async throws -> Void,
                               firstListening: AsyncStream<Void>.Continuation) async {
        var attempt = 0
        var announced = false
        while !Task.isCancelled, !stopped {
            let opened = ContinuousClock.now
            do {
                try await listenOnce(check: check) {
                    firstListening.finish()
                    // A reconnection, or a first LISTEN after a failed start: whatever changed
                    // while nobody listened is read again.
                    if announced { handler(.everything) }
                    announced = true
                } notification: { [self] payload, signer in
                    let (id, forged) = signer.change(payload, me: owner)
                    if let id { handler(.account(id)) }
                    if forged { noteForged() }
                }
            } catch {
                firstListening.finish()
                announced = true
                if Task.isCancelled || stopped { return }
                // A connection that dies young counts as a failure: a server or proxy that drops
                // every LISTEN connection must not have each host read every account again
                // several times a second.
                attempt = ContinuousClock.now - opened < .seconds(30) ? attempt + 1 : 1
                if attempt == 1 || attempt % 10 == 0 {
                    logger.warning("lost the store connection that hears other hosts' changes; reconnecting",
                                   metadata: ["error": "\(PostgresErrorText.describe(error))", "attempt": "\(attempt)"])
                }
                try? await Task.sleep(for: .seconds(reconnect.delay(attempt: attempt)))
            }
        }
    }

    /// One connection's life: connect, LISTEN, hear notifications and check the connection
    /// until either fails. `listening` is called once the LISTEN is in place.
    ///
    /// The LISTEN and the checks are tasks of their own, and the first to fail ends the
    /// connection without waiting for the other: postgres-nio may never end a LISTEN on a
    /// connection the server closed (see `firstToEnd`), and then only the checks find it.
    private func listenOnce(check: @escaping @Sendable (PostgresConnection) async throws -> Void, _ listening: () -> Void,
                            notification: @escaping @Sendable (String, ChangeSigner) -> Void) async throws {
        // Bounded by its own timeouts: 5 s for TCP, 5 s for TLS and authentication.
        let connection = try await PostgresConnections.dedicatedConnection(settings, id: 0, logger: logger)
        // Closed before it goes, whichever way this ends (postgres-nio insists).
        defer { Task { try? await connection.close() } }
        let (ready, readySignal) = AsyncStream.makeStream(of: Void.self)
        let (interval, deadline) = (checkInterval, checkDeadline)
        let signers = signers
        // Ready once every channel's LISTEN is in place.
        let inPlace = ListensInPlace()
        let hear: @Sendable () async throws -> Void = {
            defer { readySignal.finish() }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for signer in signers {
                    group.addTask {
                        try await connection.listen(on: signer.channel) { notifications in
                            if inPlace.count.withLock({ $0 += 1; return $0 }) == signers.count { readySignal.yield() }
                            for try await received in notifications { notification(received.payload, signer) }
                        }
                        throw ListenerEnded()
                    }
                }
                defer { group.cancelAll() }
                try await group.next()
            }
        }
        let keepChecking: @Sendable () async throws -> Void = {
            // A check that fails before the LISTEN is in place ends the wait for it too.
            defer { readySignal.finish() }
            while true {
                try await withDeadline(deadline) {
                    try await check(connection)
                } onExpiry: { _ in connection.close().whenComplete { _ in } }
                try await Task.sleep(for: interval)
            }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            // One child, which never waits for a LISTEN that may never end.
            group.addTask { try await firstToEnd(hear, keepChecking) }
            defer { group.cancelAll() }
            // The LISTEN is in place, or it failed (the stream ends unanswered and `next`
            // brings the failure).
            for await _ in ready {
                listening()
                break
            }
            try await group.next()
        }
    }

    /// A payload no host of this tenant signed: dropped, counted, and said at most once a minute
    /// (someone who found the channel's name must not fill the journal either).
    private func noteForged() {
        let (count, say) = forged.withLock { forged -> (Int, Bool) in
            forged.count += 1
            let now = ContinuousClock.now
            guard forged.lastSaid.map({ now - $0 >= .seconds(60) }) ?? true else { return (forged.count, false) }
            forged.lastSaid = now
            return (forged.count, true)
        }
        if say {
            logger.warning("dropped a change announcement no host of this tenant signed (another role knows the channel?)",
                           metadata: ["dropped": "\(count)"])
        }
    }
}

private struct ForgedPayloads {
    var count = 0
    var lastSaid: ContinuousClock.Instant?
}

/// How many of a connection's LISTENs are in place.
private final class ListensInPlace: Sendable {
    let count = Mutex(0)
}

/// The listening connection's notifications ended (the connection closed).
private struct ListenerEnded: Error, CustomStringConvertible {
    var description: String { "the connection closed" }
}
