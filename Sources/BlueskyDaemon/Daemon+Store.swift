import AccountStoreCore
import Crypto
import Foundation
import PostgresStore
import SQLiteStore
#if canImport(Glibc)
import Glibc
#endif

extension Daemon {
    /// The systemd credential holding the shared store's password.
    static let storePasswordCredential = "blueskyd-store-password"

    /// SQLite in the state directory, or the PostgreSQL database `store_url` names.
    /// A store whose migration meets secrets the key does not open fails here, before any
    /// row is sealed with the wrong key: said as the same configuration error as `checkStoreKey`.
    /// A shared store also opens rows under the installed second key (`store.key.new`) and `alsoOpening`.
    func openStore(stateDirectory: StateDirectory, key: SymmetricKey, keyFile: URL, alsoOpening: [SymmetricKey] = [])
        async throws(DaemonStartupError) -> any AccountStore {
        guard let url = configuration.storeURL else {
            if FileManager.default.fileExists(atPath: stateDirectory.newKeyFile.path) {
                logger.notice("""
                    store.key.new is for a rekey while a PostgreSQL tenant's hosts run; this SQLite store does not use it \
                    (stop blueskyd and run `blueskyd store rekey --new-key-file` instead)
                    """,
                              metadata: ["path": "\(stateDirectory.newKeyFile.path)"])
            }
            do {
                return try SQLiteAccountStore(directory: stateDirectory.url, key: key, logger: logger)
            } catch .secretDoesNotOpen {
                throw Self.wrongStoreKey(keyFile: keyFile, location: stateDirectory.url.path)
            } catch {
                throw DaemonStartupError(String(describing: error))
            }
        }
        try checkLease()
        var newKey: SymmetricKey?
        do {
            newKey = try StoreKey.installedNewKey(newKeyFile: stateDirectory.newKeyFile)
        } catch {
            throw DaemonStartupError("the second store key cannot be used: \(error)", exitCode: .configuration)
        }
        if let newKey, StoreKey.distinctBytes(newKey) < 16 {
            throw DaemonStartupError("the second store key \(stateDirectory.newKeyFile.path) (or its credential) is no random key "
                                     + "(\(StoreKey.distinctBytes(newKey)) distinct byte values in 32): make one with "
                                     + "`umask 077; openssl rand -hex 32`", exitCode: .configuration)
        }
        if newKey == key {
            logger.notice("store.key.new is the store key itself: nothing to add (move it away once a rekey is done)",
                          metadata: ["storeKey": "\(StoreKey.keyFingerprint(key))"])
            newKey = nil
        }
        return try await openPostgresStore(url: url, password: try storePassword(), tenant: configuration.tenant ?? Self.unixUserName(),
                                           key: key, otherKeys: (newKey.map { [$0] } ?? []) + alsoOpening, keyFile: keyFile)
    }

    /// A refresh may send two requests (the second after a DPoP nonce challenge): a lease
    /// running out during them would let another host send the same refresh token. A host of a
    /// shared store refuses such a configuration at start, and `store import --check` before it
    /// writes anything.
    func checkLease() throws(DaemonStartupError) {
        guard configuration.storeURL != nil, configuration.leaseDuration < configuration.upstreamTimeout * 2 else { return }
        throw DaemonStartupError(
            "lease_seconds (\(configuration.leaseDuration.components.seconds)) must be at least twice "
                + "upstream_timeout_seconds (\(configuration.upstreamTimeout.components.seconds)): a refresh may take "
                + "two requests, and a lease that runs out during them lets another host refresh the same account",
            exitCode: .configuration)
    }

    /// The PostgreSQL store at `url`, as `tenant`, with this configuration's lease and pool
    /// (the daemon's store, or a copy's source or target).
    /// - Parameter otherKeys: keys the store opens rows with besides `key` (`store.key.new`).
    func openPostgresStore(url: String, password: String?, tenant: String, key: SymmetricKey, otherKeys: [SymmetricKey] = [],
                           keyFile: URL, hostName: String? = nil) async throws(DaemonStartupError) -> PostgresAccountStore {
        let settings: PostgresStoreSettings
        do {
            settings = try PostgresStoreSettings(
                url: url, password: password, tenant: tenant,
                leaseDuration: Double(configuration.leaseDuration.components.seconds),
                maxConnections: configuration.storeConnections)
        } catch {
            throw DaemonStartupError(String(describing: error), exitCode: .configuration)
        }
        do {
            return try await PostgresAccountStore(settings: settings, key: key, otherKeys: otherKeys,
                                                  hostName: hostName ?? configuration.hostName ?? Self.machineName(), logger: logger)
        } catch .secretDoesNotOpen {
            throw Self.wrongStoreKey(keyFile: keyFile, location: settings.location)
        } catch .invalidSetting(let reason) {
            throw DaemonStartupError("cannot use the shared account store: \(reason)", exitCode: .configuration)
        } catch .unreachable(let location, let reason) {
            throw DaemonStartupError("cannot reach the shared account store \(location): \(reason)", exitCode: .unavailable)
        } catch {
            throw DaemonStartupError("cannot open the shared account store: \(error)")
        }
    }

    /// The password from the systemd credential, else from `store_password_file` (which, like
    /// the store key, must not be readable by other users); nil when neither is given.
    private func storePassword(environment: [String: String] = ProcessInfo.processInfo.environment) throws(DaemonStartupError) -> String? {
        var path = configuration.storePasswordFile
        var fromCredential = false
        if let credentials = environment["CREDENTIALS_DIRECTORY"], !credentials.isEmpty {
            let credential = credentials + "/" + Self.storePasswordCredential
            if FileManager.default.fileExists(atPath: credential) { (path, fromCredential) = (credential, true) }
        }
        guard let path else { return nil }
        return try Self.readPasswordFile(path, fromCredential: fromCredential)
    }

    /// A database password kept in a file, which (unless systemd's credential) must be private.
    static func readPasswordFile(_ path: String, fromCredential: Bool = false) throws(DaemonStartupError) -> String {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw DaemonStartupError("cannot read the store password file \(path): \(String(cString: strerror(errno)))",
                                     exitCode: .configuration)
        }
        // systemd's credentials are private to the service whatever their mode.
        if !fromCredential, UInt32(info.st_mode) & 0o077 != 0 {
            throw DaemonStartupError("the store password file \(path) is readable by other users; run `chmod 600 \(path)`",
                                     exitCode: .configuration)
        }
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw DaemonStartupError("cannot read the store password file \(path)", exitCode: .configuration)
        }
        return String(text.trimmingSuffix(while: \.isNewline))
    }

    static func unixUserName() -> String {
        guard let entry = getpwuid(geteuid()), let name = entry.pointee.pw_name else { return "uid\(geteuid())" }
        return String(cString: name)
    }

    static func machineName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return "localhost" }
        let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return String(decoding: bytes, as: UTF8.self)
    }
}

private extension String {
    func trimmingSuffix(while predicate: (Character) -> Bool) -> Substring {
        var end = endIndex
        while end > startIndex, predicate(self[index(before: end)]) { end = index(before: end) }
        return self[startIndex..<end]
    }
}
