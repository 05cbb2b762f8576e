import AccountStoreCore
import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization
import WebBasics

/// The store's connections: postgres-nio's `PostgresClient` (a pool that reconnects by itself),
/// run for as long as the store is open, and one deadline for every operation on it.
///
/// postgres-nio neither times out a statement nor stops waiting for one when its task is
/// cancelled: a database that drops packets would hold the caller until the kernel gives up,
/// minutes later. Here each operation races its deadline; at the deadline its connection is
/// closed, which fails the statement at once, and the caller is told the database did not answer.
///
/// A database that cannot be reached costs one caller the wait for a connection
/// (`connectionDeadline`); until the next try (0.5 s doubling to 30 s, jittered) every other
/// caller is turned away at once with the reason, instead of each waiting in the pool's queue.
final class PostgresDatabase: Sendable {
    let client: PostgresClient
    let location: String
    let logger: Logger
    /// How long one operation (a transaction, a read) may take, waiting for a connection included.
    let deadline: Duration
    /// How long an operation may wait for a connection.
    let connectionDeadline: Duration = .seconds(10)
    private let runner: Task<Void, Never>
    private let breaker = Mutex(ConnectionBreaker())
    /// Why no connection can be made (nil: one can), asked when the pool gave none in time.
    private let probe: @Sendable () async -> String?

    init(configuration: PostgresClient.Configuration, location: String, deadline: Duration = .seconds(30), logger: Logger,
         probe: @escaping @Sendable () async -> String?) {
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.client = client
        self.location = location
        self.deadline = deadline
        self.logger = logger
        self.probe = probe
        runner = Task { await client.run() }
    }

    /// Stops the pool: its connections close, and operations still waiting fail.
    func close() async {
        runner.cancel()
        await runner.value
    }

    /// Runs `body` with a connection of its own, within `deadline` (default: the database's).
    /// - Throws: `PostgresUnavailable` at once while the database is being waited out.
    func withConnection<T: Sendable>(deadline: Duration? = nil,
                                     _ body: @escaping @Sendable (PostgresSession) async throws -> T) async throws -> T {
        if let refusal = breaker.withLock({ $0.refusal(now: .now) }) { throw refusal }
        do {
            let result = try await run(deadline: deadline ?? self.deadline, body)
            breaker.withLock { $0.succeeded() }
            return result
        } catch let error as PostgresNoConnection {
            // The pool says nothing of why; one connection of our own tells (and its words are
            // what the callers turned away meanwhile are given).
            let reason = await probe().map { "\($0) (\(error))" } ?? "\(error)"
            breaker.withLock { $0.failed(reason: reason, now: .now) }
            throw PostgresNoConnection(waited: error.waited, reason: reason)
        } catch {
            if PostgresErrorText.isConnectionLoss(error) {
                let reason = PostgresErrorText.describe(error)
                breaker.withLock { $0.failed(reason: reason, now: .now) }
            }
            throw error
        }
    }

    /// `body` on a leased connection, raced against the deadline (and the wait for the lease
    /// against `connectionDeadline`).
    private func run<T: Sendable>(deadline limit: Duration,
                                  _ body: @escaping @Sendable (PostgresSession) async throws -> T) async throws -> T {
        let connectionLimit = min(limit, connectionDeadline)
        let leased = LeasedConnection()
        let (client, logger) = (client, logger)
        // Raced without a task group, which would wait for a statement postgres-nio may never
        // end once its connection is closed (see `firstToEnd`).
        let first = try await firstToEnd(
            {
                .value(try await client.withConnection { connection in
                    let expired = leased.state.withLock { state in
                        state.connection = connection
                        return state.expired
                    }
                    if expired { connection.close().whenComplete { _ in } }
                    do {
                        return try await body(PostgresSession(connection: connection, logger: logger))
                    } catch {
                        guard leased.state.withLock({ $0.expired }) else { throw error }
                        // Closed at the deadline: handed back only once closed, so that the pool
                        // does not lend it to the next caller meanwhile.
                        try? await connection.closeFuture.get()
                        throw PostgresDeadlineExceeded()
                    }
                })
            },
            {
                try await Task.sleep(for: connectionLimit)
                if leased.state.withLock({ $0.connection == nil }) { return Outcome<T>.noConnection }
                try await Task.sleep(for: limit - connectionLimit)
                return Outcome<T>.deadline
            })
        if case .value(let value) = first { return value }
        // A statement on the wire is failed by closing its connection (cancelling its task
        // would not stop it); a caller still waiting for a connection was cancelled.
        let connection = leased.state.withLock { state in
            state.expired = true
            return state.connection
        }
        connection?.close().whenComplete { _ in }
        if case .noConnection = first { throw PostgresNoConnection(waited: connectionLimit) }
        throw PostgresDeadlineExceeded()
    }

    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    func transaction<T: Sendable>(deadline: Duration? = nil,
                                  _ body: @escaping @Sendable (PostgresSession) async throws -> T) async throws -> T {
        try await withConnection(deadline: deadline) { session in
            try await session.run("BEGIN")
            do {
                let result = try await body(session)
                try await session.run("COMMIT")
                return result
            } catch {
                if !session.connection.isClosed { _ = try? await session.run("ROLLBACK") }
                throw error
            }
        }
    }
}

/// How an operation's race ended.
private enum Outcome<T: Sendable>: Sendable {
    case value(T)
    case noConnection
    case deadline
}

/// The connection an operation leased, and whether its deadline passed, shared by the operation
/// and the deadline's timer.
private final class LeasedConnection: Sendable {
    let state = Mutex<(connection: PostgresConnection?, expired: Bool)>((nil, false))
}

/// When callers are turned away without a try: after connection failures, until the next try
/// is due. The first caller after that tries; its success closes the breaker again.
private struct ConnectionBreaker {
    private var failures = 0
    private var retryAt: ContinuousClock.Instant?
    private var reason = ""

    func refusal(now: ContinuousClock.Instant) -> PostgresUnavailable? {
        guard let retryAt, now < retryAt else { return nil }
        return PostgresUnavailable(reason: reason, retryIn: retryAt - now)
    }

    mutating func failed(reason: String, now: ContinuousClock.Instant) {
        failures += 1
        self.reason = reason
        retryAt = now + .seconds(Backoff.storeRetry.delay(attempt: failures))
    }

    mutating func succeeded() {
        failures = 0
        retryAt = nil
    }
}

/// The database is being waited out after a failure: the caller is turned away without a try.
struct PostgresUnavailable: Error, CustomStringConvertible {
    var reason: String
    var retryIn: Duration
    var description: String { "\(reason) (trying again in \(String(format: "%.1f", retryIn.seconds)) s)" }
}

/// No connection could be had within the wait for one (the database cannot be reached).
struct PostgresNoConnection: Error, CustomStringConvertible {
    var waited: Duration
    /// Why, when a connection of our own found out.
    var reason: String?
    var description: String { reason ?? "no connection to the database within \(Int(waited.seconds)) s" }
}

/// An operation that did not finish within its deadline; its connection was closed.
struct PostgresDeadlineExceeded: Error, CustomStringConvertible {
    var description: String { "the database did not answer in time" }
}

/// One leased connection: statements, their rows collected.
struct PostgresSession: Sendable {
    let connection: PostgresConnection
    let logger: Logger

    @discardableResult
    func run(_ query: PostgresQuery) async throws -> [PostgresRow] {
        try await connection.query(query, logger: logger).collect()
    }

    /// A statement prepared on this connection the first time it runs there (postgres-nio
    /// keeps it by its type's name): parsed and planned once per connection.
    func run<Statement: PostgresPreparedStatement>(_ statement: Statement) async throws -> [Statement.Row] {
        var rows: [Statement.Row] = []
        for try await row in try await connection.execute(statement, logger: logger) { rows.append(row) }
        return rows
    }
}
