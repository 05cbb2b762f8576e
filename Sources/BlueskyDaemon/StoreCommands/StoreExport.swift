import AccountStoreCore
import Foundation
import WebBasics
import JSONRPC
import Logging

/// `blueskyd store export`: the whole registry in one file sealed under the store key (a
/// backup, or a registry to carry to another machine), written a page of accounts at a time
/// and in place only once complete (`ExportFile`).
public struct StoreExport: StoreSubcommand {
    /// The export format this blueskyd writes and reads.
    public static let formatVersion = Int(ExportFile.formatVersion)

    public struct Options: Sendable {
        public var to = ""
        public var dryRun = false
        public var json = false
        public init() {}
    }

    let configuration: DaemonConfiguration
    let options: Options
    let logger: Logger

    static let name = "export"

    /// Runs the command; returns its exit status (sysexits).
    public static func run(_ overrides: DaemonOverrides, options: Options) async -> Int32 {
        await runOnce(overrides, options: options)
    }

    func run() async throws(DaemonStartupError) {
        guard !options.to.isEmpty else { throw DaemonStartupError("--to names the file to write", exitCode: .usage) }
        guard !FileManager.default.fileExists(atPath: options.to) else {
            throw DaemonStartupError(ExportFileError.exists(path: options.to).description, exitCode: .cannotCreate)
        }
        let source = try StoreEndpoint.source(configuration, from: nil, tenant: nil, passwordFile: nil, keyFile: nil)
        let lock = try source.lock(role: "store")
        defer { withExtendedLifetime(lock) {} }
        let daemon = Daemon(configuration: configuration, logger: logger)
        guard let store = try await source.open(with: daemon, creating: false) else {
            throw DaemonStartupError("there is no store at \(source.location)", exitCode: .configuration)
        }
        do {
            try await export(store, source: source)
        } catch {
            await store.close()
            throw error
        }
        await store.close()
    }

    private func export(_ store: any AccountStore, source: StoreEndpoint) async throws(DaemonStartupError) {
        let survey = try await source.checkStill(store, doing: "export")
        if options.dryRun {
            say(survey, source: source, written: false, seconds: nil)
            return
        }
        let started = ContinuousClock.now
        let writer: ExportFileWriter
        do {
            writer = try ExportFileWriter(creating: options.to, storeKey: source.key)
        } catch {
            throw DaemonStartupError(error.description, exitCode: .cannotCreate)
        }
        let progress = CopyProgress(total: survey.accounts, shown: !options.json && isatty(STDERR_FILENO) == 1)
        do {
            let extras = survey.extras
            try await ExportFileThread.run { () throws(ExportFileError) in try writer.write(extras) }
            var after: AccountPageKey?
            var written = 0
            while true {
                let page = try await source.reading { () throws(StoreError) in
                    try await store.portableAccounts(after: after, limit: RegistryCopy.pageSize)
                }
                guard let last = page.last?.record else { break }
                try await ExportFileThread.run { () throws(ExportFileError) in try writer.write(page) }
                written += page.count
                progress.show(written)
                after = AccountPageKey(createdAt: last.createdAt, id: last.id)
            }
            try await ExportFileThread.run { () throws(ExportFileError) in try writer.finish() }
        } catch let error as ExportFileError {
            writer.abandon()
            throw DaemonStartupError(error.description, exitCode: .cannotCreate)
        } catch let error as DaemonStartupError {
            writer.abandon()
            throw error
        } catch {
            writer.abandon()
            throw DaemonStartupError("cannot export: \(error)")
        }
        progress.finish()
        say(survey, source: source, written: true,
            seconds: (ContinuousClock.now - started).seconds)
    }

    private func say(_ survey: RegistryCopy.Survey, source: StoreEndpoint, written: Bool, seconds: Double?) {
        let output: String
        if options.json {
            var object: [String: JSONValue] = [
                "from": .string(source.location), "to": .string(options.to), "dryRun": .bool(!written),
                "accounts": .number(Double(survey.accounts)), "clientKeys": .number(Double(survey.clientKeys)),
                "nonces": .number(Double(survey.nonces)), "keyFingerprint": .string(StoreKey.keyFingerprint(source.key)),
                "formatVersion": .number(Double(ExportFile.formatVersion)),
            ]
            object["seconds"] = seconds.map { .number(($0 * 1000).rounded() / 1000) }
            output = String(decoding: JSONValue.object(object).encoded(), as: UTF8.self)
        } else {
            let what = "\(survey.accounts) account\(survey.accounts == 1 ? "" : "s") (\(StoreCopy.kinds(survey))), "
                + "\(survey.clientKeys) OAuth client key(s), \(survey.nonces) DPoP nonce(s)"
            output = written
                ? "Exported \(what) from \(source.location) to \(options.to)" + (seconds.map { String(format: " in %.1f s", $0) } ?? "")
                    + ".\n  Sealed with the store key \(StoreKey.keyFingerprint(source.key)) (\(source.keyFile.path)): keep the "
                    + "key (apart from the file: it opens only with that key); `blueskyd store import --from \(options.to)` restores it."
                : "Dry run: would export \(what) from \(source.location) to \(options.to); nothing was written."
        }
        FileHandle.standardOutput.write(Data((output + "\n").utf8))
    }
}
