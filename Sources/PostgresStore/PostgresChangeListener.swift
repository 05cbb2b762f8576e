import BlueskyStore
import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// Hears the other hosts' changes: one connection of its own that LISTENs on the store's
/// channel, and comes back (with backoff) when it is lost. Notifications sent while it was
/// away are gone, so each reconnection reports `.everything`.
final class PostgresChangeListener: Sendable {
    private struct State {
        var connection: PostgresConnection?
        var loop: Task<Void, Never>?
        var stopped = false
    }

    private let pool: PostgresConnectionPool
    private let tenant: String
    private let owner: String
    private let logger: Logger
    private let state = Mutex(State())

    init(pool: PostgresConnectionPool, tenant: String, owner: String, logger: Logger) {
        self.pool = pool
        self.tenant = tenant
        self.owner = owner
        self.logger = logger
    }

    /// Starts listening. The first LISTEN is in place when this returns (when the database is
    /// reachable), so a change committed after it is heard; when it is not, the reconnection
    /// that follows reports `.everything`.
    func start(_ handler: @escaping @Sendable (StoreChange) -> Void) {
        let first = try? listen(handler).wait()
        let loop = Task { [self] in await keepListening(after: first, handler) }
        state.withLock { $0.loop = loop }
    }

    func stop() {
        let (connection, loop) = state.withLock { state in
            state.stopped = true
            return (state.connection, state.loop)
        }
        loop?.cancel()
        try? connection?.close().wait()
    }

    private func keepListening(after first: PostgresConnection?, _ handler: @escaping @Sendable (StoreChange) -> Void) async {
        var connection = first
        var backoff = ConnectBackoff()
        while !Task.isCancelled, !state.withLock({ $0.stopped }) {
            if let connection {
                let opened = NIODeadline.now()
                try? await connection.closeFuture.get()
                if Task.isCancelled || state.withLock({ $0.stopped }) { return }
                logger.warning("lost the store connection that hears other hosts' changes; reconnecting")
                // A connection that dies young counts as a failure: a server or proxy that drops
                // every LISTEN connection must not have each host read every account again
                // several times a second.
                if NIODeadline.now() - opened < .seconds(30) {
                    backoff.failed(reason: "the connection closed", now: .now())
                } else {
                    backoff.succeeded()
                }
            }
            connection = nil
            if let wait = backoff.remaining(now: .now()) { try? await Task.sleep(for: .nanoseconds(wait.nanoseconds)) }
            do {
                connection = try await listen(handler).get()
                // Whatever changed while nobody listened is read again.
                handler(.everything)
                logger.notice("listening for other hosts' changes again")
            } catch {
                if !backoff.isFailing {
                    logger.warning("cannot listen for other hosts' changes", metadata: [
                        "error": "\(PostgresErrorText.describe(error))"])
                }
                backoff.failed(reason: PostgresErrorText.describe(error), now: .now())
            }
        }
    }

    /// One connection with the listener installed and LISTEN sent.
    private func listen(_ handler: @escaping @Sendable (StoreChange) -> Void) -> EventLoopFuture<PostgresConnection> {
        let tenant = tenant, owner = owner, logger = logger
        return pool.connectDedicated(id: 0).flatMap { [self] connection in
            connection.addListener(channel: PostgresAccountStore.channel) { _, notification in
                if let change = Self.change(notification.payload, tenant: tenant, owner: owner) { handler(change) }
            }
            return connection.query("LISTEN \(unescaped: PostgresAccountStore.channel)", logger: logger).map { _ in
                let stopped = self.state.withLock { state in
                    state.connection = connection
                    return state.stopped
                }
                if stopped { connection.close().whenComplete { _ in } }
                return connection
            }.flatMapError { error in
                connection.close().flatMapThrowing { throw error }
            }
        }
    }

    /// "tenant owner id": another host's change to one of this tenant's accounts, or nil. The
    /// tenant and the id hold no space; the owner (a host name) may.
    static func change(_ payload: String, tenant: String, owner: String) -> StoreChange? {
        guard let first = payload.firstIndex(of: " "), let last = payload.lastIndex(of: " "), first < last,
              payload[..<first] == tenant, payload[payload.index(after: first)..<last] != owner,
              let id = UUID(uuidString: String(payload[payload.index(after: last)...])) else {
            return nil
        }
        return .account(id)
    }
}
