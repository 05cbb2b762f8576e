import AccountStoreCore
import Crypto
import Foundation
import Logging
import PostgresStore
#if canImport(Glibc)
import Glibc
#endif

/// The store key a start opens the store with, and what a `store rekey` killed before it ended
/// left beside it.
///
/// A rekey writes the new key to `store.key.next`, replaces the store with its copy sealed under
/// that key (one rename, or one transaction), then moves `store.key.next` over `store.key`. A
/// kill leaves one of two states, told apart by which key opens the store: under `store.key`,
/// nothing was resealed and `store.key.next` is removed; under `store.key.next` only, everything
/// was, and the key is moved in place. Either way the start goes on with the key that opens the
/// store. A key from systemd's credential is never replaced here (the rekey writes no
/// `store.key.next` then).
extension Daemon {
    /// Loads the key and opens the store with it, checked (`verifyKey`), after settling an
    /// interrupted rekey. Returns the store, the key that opens it and that key's file.
    /// - Parameter asHost: this start is a host's (it says so to the other hosts of a shared
    ///   store as it checks the key; a store command does not).
    /// - Parameter alsoOpening: for a shared store, keys besides the installed ones that the
    ///   store opens rows with (a rekey's new key: rows a pass while hosts ran resealed).
    func openCheckedStore(stateDirectory: StateDirectory, asHost: Bool = false, alsoOpening: [SymmetricKey] = [])
        async throws(DaemonStartupError) -> (store: any AccountStore, key: SymmetricKey, keyFile: URL) {
        let keyFile = stateDirectory.keyFile
        let key: SymmetricKey
        do {
            key = try StoreKey.load(keyFile: keyFile)
        } catch {
            // A key file that cannot be used (its mode, its size) is a configuration error, as
            // the store commands say it.
            throw DaemonStartupError(String(describing: error), exitCode: .configuration)
        }
        let fromFile = StoreKey.source(keyFile: keyFile) == keyFile.path
        let nextFile = stateDirectory.nextKeyFile
        let wrongKey: DaemonStartupError
        switch await openCheckingKey(stateDirectory: stateDirectory, key: key, keyFile: keyFile, asHost: asHost,
                                     alsoOpening: alsoOpening) {
        case .success(let store):
            // Whatever is left in store.key.next (a key, a part of one) opens nothing here.
            if fromFile, (try? FileManager.default.attributesOfItem(atPath: nextFile.path)) != nil {
                if unlink(nextFile.path) == 0 {
                    PrivateFiles.syncDirectory(stateDirectory.url.path)
                    logger.notice("a store rekey stopped before it resealed the store: it is still sealed with store.key; removed store.key.next",
                                  metadata: ["storeKey": "\(StoreKey.keyFingerprint(key))"])
                } else {
                    logger.warning("store.key.next, left by a store rekey, opens nothing and cannot be removed",
                                   metadata: ["path": "\(nextFile.path)", "error": "\(String(cString: strerror(errno)))"])
                }
            }
            return (store, key, keyFile)
        case .failure(let error):
            wrongKey = error
        }
        guard wrongKey.isWrongKey, fromFile, FileManager.default.fileExists(atPath: nextFile.path) else { throw wrongKey }
        let next: SymmetricKey
        do {
            guard let found = try StoreKey.existing(keyFile: nextFile) else { throw wrongKey }
            next = found
        } catch let error as DaemonStartupError {
            throw error
        } catch {
            throw DaemonStartupError("\(wrongKey.description); and the new key a store rekey left in \(nextFile.path) cannot be "
                                     + "read: \(error)", exitCode: .configuration)
        }
        guard case .success(let store) = await openCheckingKey(stateDirectory: stateDirectory, key: next, keyFile: nextFile,
                                                               asHost: asHost, alsoOpening: alsoOpening) else {
            throw wrongKey
        }
        guard rename(nextFile.path, keyFile.path) == 0 else {
            let reason = String(cString: strerror(errno))
            await store.close()
            throw DaemonStartupError("the store is sealed with the new key in \(nextFile.path) (a store rekey stopped as it ended), "
                                     + "which cannot be moved over \(keyFile.path): \(reason)", exitCode: .configuration)
        }
        PrivateFiles.syncDirectory(stateDirectory.url.path)
        logger.notice("a store rekey stopped as it ended: the store is sealed with the new key; moved store.key.next over store.key",
                      metadata: ["storeKey": "\(StoreKey.keyFingerprint(next))"])
        return (store, next, keyFile)
    }

    /// `openStore` and `checkStoreKey`.
    private func openCheckingKey(stateDirectory: StateDirectory, key: SymmetricKey, keyFile: URL, asHost: Bool,
                                 alsoOpening: [SymmetricKey]) async -> Result<any AccountStore, DaemonStartupError> {
        let store: any AccountStore
        do {
            store = try await openStore(stateDirectory: stateDirectory, key: key, keyFile: keyFile, alsoOpening: alsoOpening)
        } catch {
            return .failure(error)
        }
        do {
            try await checkStoreKey(store, keyFile: keyFile, asHost: asHost)
        } catch {
            await store.close()
            return .failure(error)
        }
        return .success(store)
    }

    /// A key that does not open the store's secrets (a replaced `store.key`) would fail every
    /// refresh later; say so now, naming the key file, as a configuration error.
    func checkStoreKey(_ store: any AccountStore, keyFile: URL, asHost: Bool = false) async throws(DaemonStartupError) {
        do {
            if asHost, let shared = store as? PostgresAccountStore {
                try await shared.verifyKeyAsHost()
            } else {
                try await store.verifyKey()
            }
        } catch .secretDoesNotOpen, .clientKeyDoesNotOpen {
            throw Self.wrongStoreKey(keyFile: keyFile, location: store.location)
        } catch .keyInvalid(_, let reason) {
            // The tenant seals with a key this host lacks (a rekey while hosts ran).
            throw DaemonStartupError("\(reason) (\(store.location))", exitCode: .configuration)
        } catch {
            throw DaemonStartupError("cannot check the store key: \(error)")
        }
    }

    static func wrongStoreKey(keyFile: URL, location: String) -> DaemonStartupError {
        let next = keyFile.deletingLastPathComponent().appendingPathComponent("store.key.next").path
        let hint = FileManager.default.fileExists(atPath: next)
            ? "a store rekey stopped before it ended (\(next) is there): start blueskyd, or run the rekey again, to settle it"
            : "was it replaced? put the original key back"
        var error = DaemonStartupError("the store key \(StoreKey.source(keyFile: keyFile)) does not open the secrets in \(location) "
                                       + "(\(hint))", exitCode: .configuration)
        error.isWrongKey = true
        return error
    }
}
