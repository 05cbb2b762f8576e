import BlueskyStore
import Foundation
import Logging
import PostgresStore

/// A shared PostgreSQL store opened as every host opens it (the same key, read from a key
/// file), for writing accounts into it directly: in batches, each with the due date the shared
/// schedule gives it.
public struct SeededSharedStore: Sendable {
    /// The store key in the hex text `store.key` holds: give it to every host.
    public let keyHex: String
    public let store: PostgresAccountStore

    /// A new key (in `<keyDirectory>/store.key`) and the store at `url` for `tenant`.
    public init(url: String, password: String, tenant: String, keyDirectory: String) throws {
        keyHex = SharedStoreHosts.randomKeyHex()
        try SharedStoreHosts.provisionKey(keyHex, stateDirectory: keyDirectory)
        let key = try StoreKey.load(keyFile: URL(fileURLWithPath: keyDirectory + "/store.key"), environment: [:])
        store = try PostgresAccountStore(
            settings: try PostgresStoreSettings(url: url, password: password, tenant: tenant), key: key,
            hostName: "seeding", logger: Logger(label: "seeding.store", factory: { _ in SwiftLogNoOpLogHandler() }))
    }

    /// Writes accounts `0..<count`, made by `account` one batch at a time, with the due date
    /// `due` gives each (nil: not scheduled); `written` hears the running total after each
    /// batch. Returns their ids in order.
    @discardableResult
    public func write(count: Int, batchSize: Int = 5_000, account: (Int) -> (record: AccountRecord, secrets: AccountSecrets),
                      due: (AccountRecord) -> Date?, written: (Int) -> Void = { _ in }) throws -> [UUID] {
        var ids: [UUID] = []
        ids.reserveCapacity(count)
        for start in stride(from: 0, to: count, by: batchSize) {
            let batch = (start..<min(count, start + batchSize)).map(account)
            try store.insert(contentsOf: batch)
            try store.setRefreshDue(batch.map { ($0.record.id, due($0.record)) })
            ids += batch.map(\.record.id)
            written(ids.count)
        }
        return ids
    }

    /// Makes the accounts due now: the start of an expiry storm, as the hosts see it.
    public func makeDue(_ ids: [UUID]) throws {
        let now = Date()
        try store.setRefreshDue(ids.map { ($0, now) })
    }

    public func close() { try? store.close() }
}
