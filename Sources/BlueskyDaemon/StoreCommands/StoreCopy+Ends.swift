import AccountStoreCore
import Crypto
import Foundation

/// Which stores a copy goes between, and the keys that open them.
extension StoreCopy {
    /// `--from`, or the configured store, with its key.
    func sourceEndpoint() throws(DaemonStartupError) -> StoreEndpoint {
        if options.from == nil, options.fromTenant != nil || options.fromPasswordFile != nil {
            throw DaemonStartupError("--from-tenant and --from-password-file go with --from", exitCode: .usage)
        }
        return try StoreEndpoint.source(configuration, from: options.from, tenant: options.fromTenant,
                                        passwordFile: options.fromPasswordFile, keyFile: options.fromKeyFile)
    }

    /// `--to`, with its key: `--to-key-file`, else the key already in the state directory
    /// copied into, else the source's (written there for a state directory).
    func targetEndpoint(source: StoreEndpoint) throws(DaemonStartupError) -> StoreEndpoint {
        guard !options.to.isEmpty else { throw DaemonStartupError("--to names the store to copy into", exitCode: .usage) }
        let place = try StoreEndpoint.place(options.to, tenant: options.toTenant, passwordFile: options.toPasswordFile)
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
}
