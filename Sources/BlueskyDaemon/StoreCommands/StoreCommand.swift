import Foundation
import Logging

/// What every `blueskyd store` command does around its own work: the daemon's configuration, a
/// logger on standard error (warnings and worse: the command's answer goes to standard output),
/// and a failure said as one line with its sysexits status.
enum StoreCommand {
    static func run(_ name: String, _ overrides: DaemonOverrides,
                    _ body: (DaemonConfiguration, Logger) async throws(DaemonStartupError) -> Void) async -> Int32 {
        guard let configuration = DaemonMain.configuration(overrides, command: "blueskyd store \(name)") else {
            return DaemonExitCode.configuration.rawValue
        }
        var logger = Logger(label: "blueskyd-store") { StreamLogHandler.standardError(label: $0) }
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
