import Foundation
import Logging
import SystemdGlue

/// What every `blueskyd store` command does around its own work: the daemon's configuration, a
/// logger on standard error (warnings and worse: the command's answer goes to standard output),
/// and a failure said as one line with its sysexits status.
enum StoreCommand {
    static func run(_ name: String, _ overrides: DaemonOverrides,
                    _ body: (DaemonConfiguration, Logger) async throws(DaemonStartupError) -> Void) async -> Int32 {
        guard let configuration = DaemonMain.configuration(overrides, command: "blueskyd store \(name)") else {
            return DaemonExitCode.configuration.rawValue
        }
        // The daemon's console lines: secrets redacted, and a server's words (which `import --check`
        // logs) with their control characters escaped, never taken by the terminal.
        var logger = Logger(label: "blueskyd-store") { ConsoleLogHandler(label: $0, level: LogLevelControl(.warning)) }
        logger.logLevel = .warning
        do {
            try await body(configuration, logger)
            return DaemonExitCode.ok.rawValue
        } catch {
            FileHandle.standardError.write(Data("blueskyd store \(name): \(error)\n".utf8))
            return error.exitCode.rawValue
        }
    }
}

/// One `blueskyd store` command: made from the configuration, its options and the logger, then
/// run once by `StoreCommand.run`.
protocol StoreSubcommand: Sendable {
    associatedtype Options: Sendable
    /// The word after `blueskyd store`, for messages.
    static var name: String { get }
    init(configuration: DaemonConfiguration, options: Options, logger: Logger)
    func run() async throws(DaemonStartupError)
}

extension StoreSubcommand {
    /// Makes the command and runs it; returns its exit status (sysexits).
    static func runOnce(_ overrides: DaemonOverrides, options: Options) async -> Int32 {
        await StoreCommand.run(name, overrides) { configuration, logger throws(DaemonStartupError) in
            try await Self(configuration: configuration, options: options, logger: logger).run()
        }
    }
}
