import AccountStoreCore
import Foundation
import Logging
import PostgresNIO
import Synchronization

/// A write whose answer is lost after COMMIT went out (its deadline fired, its connection
/// dropped) may have been committed all the same. For writes whose caller must not be told
/// otherwise, the transaction's id is taken first and, on such a failure, its fate is asked of
/// the database (`txid_status`) until it is settled.
extension PostgresAccountStore {
    /// How often a lost transaction's fate is asked for; it is waited for as long as one
    /// statement may take, and 10 s at least.
    static let settleInterval: Duration = .milliseconds(100)

    func writeSettlingCommit(_ context: String,
                             _ body: @escaping @Sendable (PostgresSession) async throws -> Void) async throws(StoreError) {
        let transaction = Mutex<Int64?>(nil)
        do {
            try await write(context) { session in
                let id = try await session.run("SELECT txid_current()").first?.decode(Int64.self)
                transaction.withLock { $0 = id }
                try await body(session)
            }
        } catch {
            guard error.outcomeMayBeUnknown, let id = transaction.withLock({ $0 }) else { throw error }
            switch await fate(of: id) {
            case "committed":
                logger.notice("a write's answer was lost after its commit; the database says it was made",
                              metadata: ["context": "\(context)", "reason": "\(error)"])
            default:
                throw error
            }
        }
    }

    /// `committed`, `aborted`, or nil while it cannot be told (the database away, or the
    /// transaction still in progress when the wait is over).
    private func fate(of transaction: Int64) async -> String? {
        let deadline = ContinuousClock.now + .seconds(max(10, settings.statementTimeout))
        while ContinuousClock.now < deadline {
            let status = try? await read("settling a lost commit") { session in
                try await session.run("SELECT txid_status(\(transaction))").first?.decode(String?.self)
            }
            if let status, status != "in progress" { return status }
            try? await Task.sleep(for: Self.settleInterval)
        }
        return nil
    }
}
