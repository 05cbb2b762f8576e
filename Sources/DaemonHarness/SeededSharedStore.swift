import AccountStoreCore
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

    /// The store at `url` for `tenant`, with the key `keyHex` (by default a new one) written to
    /// `<keyDirectory>/store.key`.
    public init(url: String, password: String, tenant: String, keyDirectory: String,
                keyHex: String = SharedStoreHosts.randomKeyHex()) async throws {
        self.keyHex = keyHex
        try SharedStoreHosts.provisionKey(keyHex, stateDirectory: keyDirectory)
        let key = try StoreKey.load(keyFile: URL(fileURLWithPath: keyDirectory + "/store.key"), environment: [:])
        store = try await PostgresAccountStore(
            settings: try PostgresStoreSettings(url: url, password: password, tenant: tenant), key: key,
            hostName: "seeding", logger: Logger(label: "seeding.store", factory: { _ in SwiftLogNoOpLogHandler() }))
    }

    /// Writes accounts `0..<count`, made by `account` one batch at a time, with the due date
    /// `due` gives each (nil: not scheduled); `written` hears the running total after each
    /// batch. Returns their ids in order.
    @discardableResult
    public func write(count: Int, batchSize: Int = 5_000, account: (Int) -> (record: AccountRecord, secrets: AccountSecrets),
                      due: (AccountRecord) -> Date?, written: (Int) -> Void = { _ in }) async throws -> [UUID] {
        var ids: [UUID] = []
        ids.reserveCapacity(count)
        for start in stride(from: 0, to: count, by: batchSize) {
            let batch = (start..<min(count, start + batchSize)).map(account)
            try await store.insert(contentsOf: batch)
            try await store.setRefreshDue(batch.map { ScheduledDate(id: $0.record.id, due: due($0.record), version: $0.record.secretsVersion) })
            ids += batch.map(\.record.id)
            written(ids.count)
        }
        return ids
    }

    /// Makes the accounts due now: the start of an expiry storm, as the hosts see it.
    public func makeDue(_ ids: [UUID], at date: Date = Date()) async throws {
        try await store.makeDue(ids, at: date)
    }

    public func close() async { await store.close() }
}
