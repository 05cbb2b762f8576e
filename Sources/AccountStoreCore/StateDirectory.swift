import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's private state directory: `$XDG_STATE_HOME/blueskyd`
/// (fallback `~/.local/state/blueskyd`) or an explicit path. Holds the account
/// database, the store key file and the instance lock.
public struct StateDirectory: Sendable, Equatable {
    /// The directory itself (created with mode 0700 by `init`).
    public let url: URL

    /// Resolves and creates the directory (mode 0700; an existing one is tightened).
    /// - Parameters:
    ///   - explicitPath: a path given on the command line or in the config; wins over the environment.
    ///   - environment: consulted for `XDG_STATE_HOME` and `HOME`.
    public init(explicitPath: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        let url = try Self.resolve(explicitPath: explicitPath, environment: environment)
        try PrivateFiles.ensureDirectory(url.path)
        self.url = url
    }

    /// Uses exactly `path` (created with mode 0700; an existing one is tightened).
    public init(path: URL) throws {
        try self.init(explicitPath: path.path)
    }

    /// The directory the daemon would use, without creating it.
    public static func resolve(explicitPath: String? = nil, environment: [String: String]) throws -> URL {
        if let explicitPath, !explicitPath.isEmpty {
            return URL(fileURLWithPath: explicitPath, isDirectory: true).standardizedFileURL
        }
        // The XDG spec says relative values must be ignored.
        if let stateHome = environment["XDG_STATE_HOME"], stateHome.hasPrefix("/") {
            return URL(fileURLWithPath: stateHome, isDirectory: true).appendingPathComponent("blueskyd", isDirectory: true)
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        guard home.hasPrefix("/") else {
            throw StoreError.directory(path: "~/.local/state/blueskyd", reason: "HOME is not set to an absolute path")
        }
        return URL(fileURLWithPath: home, isDirectory: true)
            .appendingPathComponent(".local/state/blueskyd", isDirectory: true)
    }

    /// Where the store key lives when systemd does not pass one as a credential.
    public var keyFile: URL { url.appendingPathComponent("store.key") }

    /// Where `blueskyd store rekey` keeps the new key while it reseals the store: moved over
    /// `store.key` when the pass ends, or by the next start when a kill came between.
    public var nextKeyFile: URL { url.appendingPathComponent("store.key.next") }

    /// A second key installed for a rekey while a shared store's hosts run (docs/design/rekey.md):
    /// the host opens rows under it too, and writes with it once the tenant names it.
    public var newKeyFile: URL { url.appendingPathComponent("store.key.new") }

    /// The single-instance lock file.
    public var lockFile: URL { url.appendingPathComponent("blueskyd.lock") }

    /// Takes the single-instance lock (`flock(LOCK_EX|LOCK_NB)` on `blueskyd.lock`,
    /// which then holds our pid). Keep the returned lock alive for the daemon's
    /// lifetime; the kernel drops it when the process dies, however it dies.
    /// - Throws: `StoreError.alreadyRunning` when another process (or another
    ///   open of the file in this process) holds it.
    public func acquireInstanceLock() throws -> InstanceLock {
        let lock = try InstanceLock(path: lockFile.path, directory: url.path)
        removeAbandonedKeyFiles()
        return lock
    }

    /// Removes what a process killed while writing here left: `store.key.new-…` and
    /// `store.key.next.new-…` (a key or part of one, private, never published), and `.copy-…`
    /// (a store a copy, merge or rekey was building, never moved in). Only the holder of the
    /// instance lock writes them.
    private func removeAbandonedKeyFiles() {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        for name in names where name.hasPrefix("store.key.new-") || name.hasPrefix("store.key.next.new-") {
            unlink(url.appendingPathComponent(name).path)
        }
        for name in names where name.hasPrefix(".copy-") {
            try? FileManager.default.removeItem(at: url.appendingPathComponent(name))
        }
    }
}
