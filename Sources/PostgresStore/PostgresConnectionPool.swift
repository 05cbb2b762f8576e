import BlueskyStore
import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO

/// A few PostgreSQL connections for callers that block: the store's methods are synchronous,
/// like SQLite's, and run on the daemon's background threads, never on an event loop; the
/// connections' I/O runs on NIO's event loops meanwhile.
///
/// A lost connection is dropped and the next caller opens a new one. When opening fails, the
/// pool waits (0.5 s doubling to 30 s) before trying again, and callers meanwhile fail at once
/// with `StoreError.unreachable`: a dead database costs no thread and spins no loop.
final class PostgresConnectionPool: @unchecked Sendable {
    private let settings: PostgresStoreSettings
    private let configuration: PostgresConnection.Configuration
    private let group: any EventLoopGroup
    private let logger: Logger
    /// How long one statement may take before its connection is closed (a hung server).
    private let statementTimeout: TimeAmount = .seconds(30)

    private let condition = NSCondition()
    private var idle: [PostgresConnection] = []
    private var open = 0
    private var closed = false
    private var nextID = 0
    private var backoff = ConnectBackoff()

    init(settings: PostgresStoreSettings, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
         logger: Logger) throws(StoreError) {
        self.settings = settings
        self.configuration = try Self.configuration(settings)
        self.group = group
        self.logger = logger
    }

    /// Runs `body` with a connection of its own, returned to the pool afterwards (closed instead
    /// when it broke). Each statement may take `timeout` (default 30 s).
    func withConnection<T>(timeout: TimeAmount? = nil, _ body: (PostgresSessionHandle) throws -> T) throws -> T {
        // Waiting for a connection, or on one, would stall every channel of an event loop.
        assertOffEventLoop("a PostgreSQL statement")
        let connection = try checkOut()
        defer { checkIn(connection) }
        return try body(PostgresSessionHandle(connection: connection, timeout: timeout ?? statementTimeout, logger: logger))
    }

    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    func transaction<T>(timeout: TimeAmount? = nil, _ body: (PostgresSessionHandle) throws -> T) throws -> T {
        try withConnection(timeout: timeout) { session in
            try session.run("BEGIN")
            do {
                let result = try body(session)
                try session.run("COMMIT")
                return result
            } catch {
                if !session.connection.isClosed { _ = try? session.run("ROLLBACK") }
                throw error
            }
        }
    }

    /// Opens one connection outside the pool (the change listener's).
    func connectDedicated(id: Int) -> EventLoopFuture<PostgresConnection> {
        PostgresConnection.connect(on: group.next(), configuration: configuration, id: id, logger: logger)
    }

    func close() {
        let connections = condition.withLock { () -> [PostgresConnection] in
            closed = true
            defer { idle.removeAll() }
            condition.broadcast()
            return idle
        }
        for connection in connections { try? connection.close().wait() }
    }

    private func checkOut() throws -> PostgresConnection {
        condition.lock()
        while true {
            if closed {
                condition.unlock()
                throw StoreError.unreachable(location: settings.location, reason: "the store is closed")
            }
            if let connection = idle.popLast() {
                if connection.isClosed { open -= 1; continue }
                condition.unlock()
                return connection
            }
            if open < settings.maxConnections { break }
            condition.wait()
        }
        if let refusal = backoff.refusal(now: .now()) {
            condition.unlock()
            throw StoreError.unreachable(location: settings.location, reason: refusal)
        }
        open += 1
        nextID += 1
        let id = nextID
        condition.unlock()
        do {
            let connection = try PostgresConnection.connect(on: group.next(), configuration: configuration, id: id,
                                                            logger: logger).wait()
            condition.withLock { backoff.succeeded() }
            return connection
        } catch {
            let reason = PostgresErrorText.describe(error)
            condition.withLock {
                open -= 1
                backoff.failed(reason: reason, now: .now())
                condition.signal()
            }
            throw StoreError.unreachable(location: settings.location, reason: reason)
        }
    }

    private func checkIn(_ connection: PostgresConnection) {
        let stale = condition.withLock { () -> Bool in
            defer { condition.signal() }
            if closed || connection.isClosed {
                open -= 1
                return true
            }
            idle.append(connection)
            return false
        }
        if stale, !connection.isClosed { connection.close().whenComplete { _ in } }
    }

    private static func configuration(_ settings: PostgresStoreSettings) throws(StoreError) -> PostgresConnection.Configuration {
        var configuration = PostgresConnection.Configuration(
            host: settings.host, port: settings.port, username: settings.user, password: settings.password,
            database: settings.database, tls: try PostgresTLS.mode(settings))
        configuration.options.connectTimeout = .seconds(5)
        // Durable commits whatever the server's default: a rotated refresh token that a crash
        // could take back loses the account. Read committed whatever the role's default: the
        // claims, the default's advisory lock and the conflict checks after an insert each
        // need to see what other hosts committed a moment ago.
        configuration.options.additionalStartupParameters = [
            ("synchronous_commit", "on"), ("default_transaction_isolation", "read committed"),
            ("application_name", "blueskyd"),
        ]
        return configuration
    }
}

/// When the pool may try to connect again after failures.
struct ConnectBackoff {
    private var failures = 0
    private var retryAt: NIODeadline?
    private var lastReason = ""

    /// Why a caller is turned away now, or nil when a connection may be tried.
    func refusal(now: NIODeadline) -> String? {
        guard let wait = remaining(now: now) else { return nil }
        return "\(lastReason) (trying again in \(String(format: "%.1f", Double(wait.nanoseconds) / 1e9)) s)"
    }

    /// Whether the last tries failed (an episode is under way).
    var isFailing: Bool { failures > 0 }

    /// How long until the next try; nil when it may be now.
    func remaining(now: NIODeadline) -> TimeAmount? {
        guard let retryAt, now < retryAt else { return nil }
        return retryAt - now
    }

    mutating func failed(reason: String, now: NIODeadline) {
        failures += 1
        lastReason = reason
        let delay = min(30.0, 0.5 * pow(2.0, Double(min(failures - 1, 8))))
        // Hosts that lost the same database should not all come back in the same instant.
        retryAt = now + .nanoseconds(Int64(delay * Double.random(in: 0.8...1.0) * 1e9))
    }

    mutating func succeeded() {
        failures = 0
        retryAt = nil
    }
}

/// One checked-out connection: statements with a deadline.
struct PostgresSessionHandle {
    let connection: PostgresConnection
    let timeout: TimeAmount
    let logger: Logger

    /// Runs one statement and collects its rows. A statement that outlives the timeout closes
    /// the connection (which fails it); the pool then drops the connection.
    @discardableResult
    func run(_ query: PostgresQuery) throws -> PostgresQueryResult {
        let future = connection.query(query, logger: logger)
        let watchdog = connection.eventLoop.scheduleTask(in: timeout) { [connection] in
            connection.close().whenComplete { _ in }
        }
        defer { watchdog.cancel() }
        return try future.wait()
    }
}
