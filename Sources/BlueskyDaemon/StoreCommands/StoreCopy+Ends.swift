import AccountStoreCore
import Crypto
import Foundation

/// Which stores a copy goes between, and the keys that open them.
extension StoreCopy {
    /// `--from`, or the configured store, with its key: `--from-key-file`, else the key of
    /// the state directory copied from, else the daemon's (its credential or `store.key`).
    func sourceEndpoint() throws(DaemonStartupError) -> StoreEndpoint {
        let fallbackTenant = configuration.tenant ?? Daemon.unixUserName()
        let place: StoreEndpoint.Place
        if let from = options.from {
            place = try StoreEndpoint.place(from, tenant: options.fromTenant, passwordFile: options.fromPasswordFile,
                                            fallbackTenant: fallbackTenant)
        } else {
            guard options.fromTenant == nil, options.fromPasswordFile == nil else {
                throw DaemonStartupError("--from-tenant and --from-password-file go with --from", exitCode: .usage)
            }
            place = try configuredPlace(fallbackTenant: fallbackTenant)
        }
        if let path = options.fromKeyFile {
            let file = URL(fileURLWithPath: path)
            return StoreEndpoint(place: place, key: try StoreEndpoint.existingKey(file), keyFile: file)
        }
        if options.from != nil, case .sqlite(let directory) = place {
            return StoreEndpoint(place: place, key: try StoreEndpoint.existingKey(directory.keyFile), keyFile: directory.keyFile)
        }
        let (key, file) = try daemonKey()
        return StoreEndpoint(place: place, key: key, keyFile: file)
    }

    /// `--to`, with its key: `--to-key-file`, else the key already in the state directory
    /// copied into, else the source's (written there for a state directory).
    func targetEndpoint(source: StoreEndpoint) throws(DaemonStartupError) -> StoreEndpoint {
        guard !options.to.isEmpty else { throw DaemonStartupError("--to names the store to copy into", exitCode: .usage) }
        let place = try StoreEndpoint.place(options.to, tenant: options.toTenant, passwordFile: options.toPasswordFile,
                                            fallbackTenant: source.tenant ?? configuration.tenant ?? Daemon.unixUserName())
        if let path = options.toKeyFile {
            let file = URL(fileURLWithPath: path)
            return StoreEndpoint(place: place, key: try StoreEndpoint.existingKey(file), keyFile: file)
        }
        if case .sqlite(let directory) = place {
            let existing: SymmetricKey?
            do {
                existing = try StoreKey.existing(keyFile: directory.keyFile)
            } catch {
                throw DaemonStartupError(String(describing: error), exitCode: .configuration)
            }
            return StoreEndpoint(place: place, key: existing ?? source.key, keyFile: directory.keyFile)
        }
        return StoreEndpoint(place: place, key: source.key, keyFile: source.keyFile)
    }

    private func configuredPlace(fallbackTenant: String) throws(DaemonStartupError) -> StoreEndpoint.Place {
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

    /// The daemon's own key: systemd's credential, else the state directory's `store.key`,
    /// which must exist (a copy never makes up the key of the store it reads).
    private func daemonKey() throws(DaemonStartupError) -> (SymmetricKey, URL) {
        let file = URL(fileURLWithPath: configuration.stateDirectory).appendingPathComponent("store.key")
        let credentials = ProcessInfo.processInfo.environment["CREDENTIALS_DIRECTORY"] ?? ""
        let credential = credentials + "/blueskyd-store-key"
        guard !credentials.isEmpty, FileManager.default.fileExists(atPath: credential) else {
            return (try StoreEndpoint.existingKey(file), file)
        }
        do {
            return (try StoreKey.load(keyFile: file), URL(fileURLWithPath: credential))
        } catch {
            throw DaemonStartupError(String(describing: error), exitCode: .configuration)
        }
    }
}
