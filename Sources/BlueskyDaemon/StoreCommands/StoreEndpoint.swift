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

    /// A store URL as a message may show it: no password, no query (which may carry one).
    static func withoutSecrets(_ text: String) -> String {
        guard var components = URLComponents(string: text) else { return "the store URL" }
        if components.password != nil { components.password = "…" }
        components.query = nil
        return components.string ?? "the store URL"
    }

    /// "postgres://…" or "postgresql://…" names a database; anything else a state directory.
    /// A PostgreSQL tenant defaults to the URL's user: row-level security holds a role to the
    /// tenant of its name. `mustExist`: a state directory read from (never made up by a typo).
    static func place(_ text: String, tenant: String?, passwordFile: String?, mustExist: Bool = false)
        throws(DaemonStartupError) -> Place {
        if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
            let user: String
            do {
                user = try PostgresStoreSettings(url: text, password: nil, tenant: "x").user
            } catch {
                // The settings' own reason (a password in the URL, no user, an unknown parameter),
                // about the URL without its secrets: a blind attack saw a password echoed here.
                throw DaemonStartupError("cannot use \(Self.withoutSecrets(text)) as a store: \(error)", exitCode: .usage)
            }
            let tenant = tenant ?? user
            return .postgres(url: text, tenant: tenant,
                             password: try passwordFile.map { path throws(DaemonStartupError) in try Daemon.readPasswordFile(path) })
        }
        guard tenant == nil, passwordFile == nil else {
            throw DaemonStartupError("a tenant and a password file name a PostgreSQL store; \(text) is a state directory (SQLite)",
                                     exitCode: .usage)
        }
        if mustExist {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: text, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw DaemonStartupError("there is no state directory at \(text)", exitCode: .noInput)
            }
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

    /// What tells two stores apart however they are named: a state directory's real path
    /// (symbolic links resolved), a database's location and tenant.
    var identity: String {
        switch place {
        case .sqlite(let directory): directory.url.resolvingSymlinksInPath().standardizedFileURL.path
        case .postgres: location
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
    /// - Parameter otherKeys: for PostgreSQL, keys it opens rows with besides `key`.
    func open(with daemon: Daemon, creating: Bool = true, otherKeys: [SymmetricKey] = []) async throws(DaemonStartupError)
        -> (any AccountStore)? {
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
            return try await daemon.openPostgresStore(url: url, password: password, tenant: tenant, key: key, otherKeys: otherKeys,
                                                      keyFile: keyFile, hostName: "blueskyd-store-copy")
        }
    }
}

/// The stores and keys the store commands work on, from the options and the configuration.
extension StoreEndpoint {
    /// `from` (a state directory or a URL), or the configured store, with its key:
    /// `keyFile`, else the key of the state directory named, else the daemon's (its credential
    /// or `store.key`).
    static func source(_ configuration: DaemonConfiguration, from: String?, tenant: String?, passwordFile: String?,
                       keyFile: String?) throws(DaemonStartupError) -> StoreEndpoint {
        let fallbackTenant = configuration.tenant ?? Daemon.unixUserName()
        let place: Place
        if let from {
            place = try Self.place(from, tenant: tenant, passwordFile: passwordFile, mustExist: true)
        } else {
            place = try configuredPlace(configuration, fallbackTenant: fallbackTenant)
        }
        if let keyFile {
            let file = URL(fileURLWithPath: keyFile)
            return StoreEndpoint(place: place, key: try existingKey(file), keyFile: file)
        }
        if from != nil, case .sqlite(let directory) = place {
            return StoreEndpoint(place: place, key: try existingKey(directory.keyFile), keyFile: directory.keyFile)
        }
        let (key, file) = try daemonKey(configuration)
        return StoreEndpoint(place: place, key: key, keyFile: file)
    }

    static func configuredPlace(_ configuration: DaemonConfiguration, fallbackTenant: String) throws(DaemonStartupError) -> Place {
        if let url = configuration.storeURL {
            let password = try configuration.storePasswordFile.map { path throws(DaemonStartupError) in
                try Daemon.readPasswordFile(path)
            }
            return .postgres(url: url, tenant: fallbackTenant, password: password)
        }
        do {
            return .sqlite(try StateDirectory(path: URL(fileURLWithPath: configuration.stateDirectory)))
        } catch {
            throw DaemonStartupError("cannot use the state directory \(configuration.stateDirectory): \(error)",
                                     exitCode: .configuration)
        }
    }

    /// The daemon's own key, where `blueskyd` itself takes it (systemd's credential, else the
    /// state directory's `store.key`), or nil when there is none yet. Never made up: a store
    /// command reads with the key the store was sealed with, or not at all.
    static func daemonKeyIfAny(_ configuration: DaemonConfiguration) throws(DaemonStartupError) -> (SymmetricKey, URL)? {
        let file = URL(fileURLWithPath: StoreKey.source(keyFile: URL(fileURLWithPath: configuration.stateDirectory)
            .appendingPathComponent("store.key")))
        do {
            return try StoreKey.existing(keyFile: file).map { ($0, file) }
        } catch {
            throw DaemonStartupError(String(describing: error), exitCode: .configuration)
        }
    }

    /// `daemonKeyIfAny`, which must find one.
    static func daemonKey(_ configuration: DaemonConfiguration) throws(DaemonStartupError) -> (SymmetricKey, URL) {
        guard let found = try daemonKeyIfAny(configuration) else {
            throw DaemonStartupError("no store key at \(configuration.stateDirectory)/store.key", exitCode: .configuration)
        }
        return found
    }
}
