import AccountStoreCore
import Foundation
import Logging
import SQLiteStore

/// Accounts written straight into a daemon's own SQLite store before it starts, as blueskyd
/// itself would have written them after their logins: the same directory, key file and sealed
/// secrets. For benchmarks and tests that need thousands of accounts.
public enum SeededLocalStore {
    /// Writes accounts `0..<count`, made by `account`, into `<stateDirectory>` in batches, with
    /// the key at `<stateDirectory>/store.key` (both created when missing: blueskyd reads
    /// exactly that file).
    public static func write(stateDirectory: String, count: Int, batchSize: Int = 5_000,
                             account: (Int) -> (record: AccountRecord, secrets: AccountSecrets)) async throws {
        let directory = URL(fileURLWithPath: stateDirectory)
        let logger = Logger(label: "blueskyd.seeding", factory: { _ in SwiftLogNoOpLogHandler() })
        let key = try StoreKey.load(keyFile: directory.appendingPathComponent("store.key"), environment: [:])
        let store = try SQLiteAccountStore(directory: directory, key: key, logger: logger)
        do {
            for start in stride(from: 0, to: count, by: batchSize) {
                try await store.insert(contentsOf: (start..<min(count, start + batchSize)).map(account))
            }
        } catch {
            await store.close()
            throw error
        }
        await store.close()
    }
}
