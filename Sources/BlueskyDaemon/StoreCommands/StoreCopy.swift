import AccountStoreCore
import Crypto
import Foundation
import WebBasics
import JSONRPC
import Logging
import PostgresStore
import SQLiteStore
import Synchronization

/// `blueskyd store copy`: every account of a store, with all its sessions need, into another
/// store (SQLite to PostgreSQL, back, or between databases), so that a registry
/// moves without a single login.
///
/// Nothing is copied that cannot be trusted: a source row whose seal fails stops the copy
/// before anything is written (sealing it under the target's key would bless it). The source is
/// held still (its instance lock, or no live host of its tenant); the target must be empty and
/// gets the copy whole or not at all (one transaction, or a file moved in place).
public struct StoreCopy: StoreSubcommand {
    public struct Options: Sendable {
        /// A state directory or a PostgreSQL URL; nil: the configured store.
        public var from: String?
        public var fromTenant: String?
        public var fromPasswordFile: String?
        public var fromKeyFile: String?
        public var to = ""
        public var toTenant: String?
        public var toPasswordFile: String?
        public var toKeyFile: String?
        /// Into a store that holds accounts: each account keeps its newer session.
        public var merge = false
        public var dryRun = false
        public var json = false
        public init() {}
    }

    let configuration: DaemonConfiguration
    let options: Options
    let logger: Logger

    static let name = "copy"

    /// Runs the command; returns its exit status (sysexits).
    public static func run(_ overrides: DaemonOverrides, options: Options) async -> Int32 {
        await runOnce(overrides, options: options)
    }

    func run() async throws(DaemonStartupError) {
        let source = try sourceEndpoint()
        let target = try targetEndpoint(source: source)
        guard source.identity != target.identity else {
            throw DaemonStartupError("the source and the target are the same store (\(source.location))", exitCode: .usage)
        }
        let locks = (try source.lock(role: "source"), try target.lock(role: "target"))
        defer { withExtendedLifetime(locks) {} }
        let daemon = Daemon(configuration: configuration, logger: logger)
        guard let from = try await source.open(with: daemon, creating: false) else {
            throw DaemonStartupError("there is no store at \(source.location)", exitCode: .configuration)
        }
        do {
            try await copy(from: from, source: source, to: target, daemon: daemon)
        } catch {
            await from.close()
            throw error
        }
        await from.close()
    }

    private func copy(from: any AccountStore, source: StoreEndpoint, to target: StoreEndpoint, daemon: Daemon)
        async throws(DaemonStartupError) {
        let survey = try await source.checkStill(from, doing: "copy")
        guard survey.accounts > 0 else {
            throw DaemonStartupError("\(source.location) holds no account: nothing to copy (a mistyped tenant?)", exitCode: .noInput)
        }
        let merging = options.merge ? try await target.openForMerge(daemon: daemon) : nil
        if options.dryRun {
            if let merging {
                await merging.store.close()
                try await StoreEndpoint.dryMerge(merging.merge, from: from, source: source)
            } else {
                try await target.checkEmpty(daemon: daemon)
            }
            report(survey, source: source, target: target, copied: nil, seconds: nil, merge: merging?.merge)
            return
        }
        let extras = survey.extras
        let started = ContinuousClock.now
        let progress = CopyProgress(total: survey.accounts, shown: !options.json && isatty(STDERR_FILENO) == 1)
        let copied = Mutex(0)
        let input = StoreEndpoint.InputFailure()
        let produce: @Sendable (any RegistryWriter) async throws(StoreError) -> Void = { writer throws(StoreError) in
            let count = try await RegistryCopy.copyAccounts(from: from, into: writer, progress: { progress.show($0) },
                                                               sourceFailed: { input.record(source.readFailure($0)) })
            copied.withLock { $0 = count }
            // Checked again before the target commits: a host started during the copy may have
            // rotated tokens it copied.
            try await source.stillAtEnd(from, input: input)
        }
        var renumbered: [UUID: UUID] = [:]
        if let merging {
            try await target.mergeRegistry(merging, sourceExtras: extras, daemon: daemon, logger: logger, input: input, produce)
        } else {
            renumbered = try await target.importRegistry(extras: extras, daemon: daemon, logger: logger, input: input, produce)
        }
        progress.finish()
        report(survey, source: source, target: target, copied: copied.withLock { $0 },
               seconds: (ContinuousClock.now - started).seconds, merge: merging?.merge, renumbered: renumbered)
    }
}
