import AccountStoreCore
import Crypto
import Foundation
import Logging
import PostgresStore
import SQLiteStore
import Synchronization

/// Writing a whole registry into a store (`store copy`, `store import`): empty first, whole or
/// not at all, and with the key that opens it beside it.
extension StoreEndpoint {
    /// Where a failure came from: what is read (the source store, the export file) fails with
    /// `input`'s message; anything else is the target's.
    final class InputFailure: Sendable {
        private let failure = Mutex<DaemonStartupError?>(nil)
        func record(_ error: DaemonStartupError) { failure.withLock { $0 = $0 ?? error } }
        var recorded: DaemonStartupError? { failure.withLock { $0 } }
    }

    /// Writes `extras` and what `produce` hands over into this store, which must hold nothing.
    /// A state directory gets this endpoint's key as its `store.key` when it has none (removed
    /// again if the import fails), and is refused when it holds another.
    /// - Parameters:
    ///   - replacing: this store itself, open under its old key, which `produce` reads
    ///     (`store rekey`): its rows are replaced whole (a SQLite store is closed by it), and its
    ///     key file is left to the caller.
    ///   - keyHome: a PostgreSQL store's host state directory, which gets the key as its
    ///     `store.key` when it has none (`store import` into the configured tenant: its hosts
    ///     start with that key), put in place before the transaction and removed if it fails.
    @discardableResult
    func importRegistry(extras: RegistryExtras, daemon: Daemon, logger: Logger, input: InputFailure,
                        replacing: (any AccountStore)? = nil, keyHome: StateDirectory? = nil,
                        _ produce: @escaping @Sendable (any RegistryWriter) async throws(StoreError) -> Void)
        async throws(DaemonStartupError) -> [UUID: UUID] {
        var renumbered: [UUID: UUID] = [:]
        do {
            switch place {
            case .sqlite(let directory):
                // Checked first (a state directory holding another key is refused before any
                // work), and put in place just before the store is moved in.
                if replacing == nil { try checkKey(in: directory) }
                var installed = false
                do {
                    _ = try await SQLiteAccountStore.importRegistry(
                        into: directory.url, key: key, logger: logger, extras: extras, replacing: replacing as? SQLiteAccountStore,
                        beforeMove: { () throws(StoreError) in
                            if replacing == nil { installed = try installKey(in: directory) }
                        }, produce)
                } catch {
                    if installed { unlink(directory.keyFile.path) }
                    throw error
                }
            case .postgres:
                guard let store = try await open(with: daemon) as? PostgresAccountStore else {
                    throw DaemonStartupError("\(location) is not a PostgreSQL store")
                }
                // Before the commit: a kill after it must not leave the tenant sealed under a key
                // no host has (a key beside an empty tenant opens it as well as any).
                var installed = false
                do {
                    if let keyHome {
                        try checkKey(in: keyHome)
                        installed = try installKey(in: keyHome)
                    }
                    renumbered = try await store.importRegistry(extras: extras, replacing: replacing != nil, produce)
                } catch {
                    if installed, let keyHome { unlink(keyHome.keyFile.path) }
                    await store.close()
                    throw error
                }
                await store.close()
            }
        } catch let error as DaemonStartupError {
            throw error
        } catch let error as StoreError {
            if let failure = input.recorded { throw failure }
            throw failure(error)
        } catch {
            throw DaemonStartupError("cannot write \(location): \(error)")
        }
        return renumbered
    }

    /// Refuses a state directory whose key is another than this one (the store would not open
    /// with it).
    private func checkKey(in directory: StateDirectory) throws(DaemonStartupError) {
        let existing: SymmetricKey?
        do {
            existing = try StoreKey.existing(keyFile: directory.keyFile)
        } catch {
            throw DaemonStartupError(String(describing: error), exitCode: .configuration)
        }
        if let existing, existing != key {
            throw DaemonStartupError(
                "\(directory.keyFile.path) holds another key (\(StoreKey.keyFingerprint(existing))) than the one the "
                    + "store would be sealed with (\(StoreKey.keyFingerprint(key))): the daemon could not open it; "
                    + "leave out --to-key-file, or remove that key if it seals nothing", exitCode: .configuration)
        }
    }

    /// The key beside a state directory's store: installed when there is none (true), kept when
    /// it is this one, refused when it is another.
    private func installKey(in directory: StateDirectory) throws(StoreError) -> Bool {
        do {
            if let existing = try StoreKey.existing(keyFile: directory.keyFile) {
                guard existing == key else {
                    throw StoreError.keyInvalid(path: directory.keyFile.path, reason: "another key appeared during the copy")
                }
                return false
            }
            return try StoreKey.install(key, keyFile: directory.keyFile)
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError.keyUnavailable(path: directory.keyFile.path, reason: "\(error)")
        }
    }

    /// Whether a copy or an import would find this store empty (a dry run's check; the write
    /// checks again under its lock). A state directory without a store is empty.
    func checkEmpty(daemon: Daemon) async throws(DaemonStartupError) {
        guard let store = try await open(with: daemon, creating: false) else { return }
        let held: Int
        do {
            held = try await store.count() + store.clientKeys().count
        } catch {
            await store.close()
            throw failure(error)
        }
        await store.close()
        guard held == 0 else { throw failure(.targetNotEmpty(location: location, accounts: held)) }
    }

    /// A store error of this (target) store, as one line with its exit status.
    func failure(_ error: StoreError) -> DaemonStartupError {
        switch error {
        case .targetNotEmpty:
            DaemonStartupError("\(error); nothing was written", exitCode: .cannotCreate)
        case .hostsAlive:
            DaemonStartupError("\(location): \(error); nothing was written", exitCode: .alreadyRunning)
        case .unreachable:
            DaemonStartupError("cannot reach \(location): \(error); nothing was written, unless the connection was lost "
                               + "as it committed: run the same command again (exit 73 then says it is in place)", exitCode: .unavailable)
        case .secretDoesNotOpen, .clientKeyDoesNotOpen:
            DaemonStartupError("the key does not open what \(location) holds: \(error)", exitCode: .configuration)
        default:
            DaemonStartupError("cannot write \(location): \(error); nothing was written", exitCode: .cannotCreate)
        }
    }
}
