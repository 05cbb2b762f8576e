import AccountStoreCore
import Crypto
import Foundation
import PostgresStore
import SQLiteStore

/// One end of `blueskyd store copy`: a SQLite store (a state directory) or a PostgreSQL
/// tenant, opened with its key, and held still while the copy runs.
struct StoreEndpoint {
    enum Place {
        case sqlite(StateDirectory)
        case postgres(url: String, tenant: String, password: String?)
    }

    let place: Place
    let key: SymmetricKey
    /// The key's file, for messages.
    let keyFile: URL

    /// "postgres://…" or "postgresql://…" names a database; anything else a state directory.
    static func place(_ text: String, tenant: String?, passwordFile: String?, fallbackTenant: String)
        throws(DaemonStartupError) -> Place {
        if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
            return .postgres(url: text, tenant: tenant ?? fallbackTenant,
                             password: try passwordFile.map { path throws(DaemonStartupError) in try Daemon.readPasswordFile(path) })
        }
        guard tenant == nil, passwordFile == nil else {
            throw DaemonStartupError("a tenant and a password file name a PostgreSQL store; \(text) is a state directory (SQLite)",
                                     exitCode: .usage)
        }
        do {
            return .sqlite(try StateDirectory(path: URL(fileURLWithPath: text)))
        } catch {
            throw DaemonStartupError("cannot use the state directory \(text): \(error)", exitCode: .configuration)
        }
    }

    /// The key in `path`, which must exist.
    static func existingKey(_ path: URL) throws(DaemonStartupError) -> SymmetricKey {
        do {
            guard let key = try StoreKey.existing(keyFile: path) else {
                throw DaemonStartupError("no store key at \(path.path)", exitCode: .configuration)
            }
            return key
        } catch let error as DaemonStartupError {
            throw error
        } catch {
            throw DaemonStartupError(String(describing: error), exitCode: .configuration)
        }
    }

    var location: String {
        switch place {
        case .sqlite(let directory): directory.url.appendingPathComponent(SQLiteAccountStore.databaseFileName).path
        case .postgres(let url, let tenant, _):
            // The URL without its password, as the store names itself.
            "\((try? PostgresStoreSettings(url: url, password: nil, tenant: tenant))?.location ?? "the PostgreSQL store") (tenant \(tenant))"
        }
    }

    var tenant: String? {
        if case .postgres(_, let tenant, _) = place { return tenant }
        return nil
    }

    /// Takes the state directory's instance lock (no daemon may use a SQLite store being copied
    /// from or into).
    func lock(role: String) throws(DaemonStartupError) -> InstanceLock? {
        guard case .sqlite(let directory) = place else { return nil }
        do {
            return try directory.acquireInstanceLock()
        } catch StoreError.alreadyRunning(let pid, _) {
            throw DaemonStartupError("the \(role) \(directory.url.path) is in use by blueskyd\(pid.map { " (pid \($0))" } ?? ""): "
                                     + "stop it first (systemctl --user stop blueskyd)", exitCode: .alreadyRunning)
        } catch {
            throw DaemonStartupError("cannot lock the \(role) \(directory.url.path): \(error)", exitCode: .alreadyRunning)
        }
    }

    /// Opens the store. A SQLite target that does not exist yet is not created here (the copy
    /// creates it whole): nil then.
    func open(with daemon: Daemon, creating: Bool = true) async throws(DaemonStartupError) -> (any AccountStore)? {
        switch place {
        case .sqlite(let directory):
            let path = directory.url.appendingPathComponent(SQLiteAccountStore.databaseFileName).path
            guard creating || FileManager.default.fileExists(atPath: path) else { return nil }
            do {
                return try SQLiteAccountStore(directory: directory.url, key: key, logger: daemon.logger)
            } catch .secretDoesNotOpen {
                throw Daemon.wrongStoreKey(keyFile: keyFile, location: path)
            } catch {
                throw DaemonStartupError(String(describing: error))
            }
        case .postgres(let url, let tenant, let password):
            return try await daemon.openPostgresStore(url: url, password: password, tenant: tenant, key: key, keyFile: keyFile,
                                                      hostName: "blueskyd-store-copy")
        }
    }
}
