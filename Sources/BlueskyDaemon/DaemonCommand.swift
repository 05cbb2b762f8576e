import Foundation
import Logging
import SystemdGlue

/// Exit statuses of blueskyd (documented in blueskyd(1)).
public enum DaemonExitCode: Int32, Sendable {
    case ok = 0
    case failure = 1
    case usage = 64
    /// The input cannot be used as it is (a row whose seal fails, a damaged file).
    case dataError = 65
    /// An input file that cannot be read.
    case noInput = 66
    /// A database that cannot be reached.
    case unavailable = 69
    /// The target cannot take what is asked (a store that already holds accounts).
    case cannotCreate = 73
    case alreadyRunning = 75
    case configuration = 78
}

/// Command-line overrides, applied over the environment, the file and the defaults.
public struct DaemonOverrides: Sendable {
    public var configFile: String?
    public var stateDirectory: String?
    public var socketPath: String?
    /// The gateway's socket ("" turns it off).
    public var gatewaySocket: String?
    /// A loopback `host:port` for the gateway ("" turns it off).
    public var gatewayListen: String?
    /// The metrics socket ("" turns it off).
    public var metricsSocket: String?
    /// A loopback `host:port` for the metrics ("" turns it off).
    public var metricsListen: String?
    public var logLevel: String?
    public var logTarget: String?
    public var nameservers: [String] = []
    public var plcURL: String?
    public var caFile: String?
    public var allowInsecureLoopback: Bool = false

    public init() {}
}

extension DaemonConfiguration {
    /// Builds the configuration: defaults < file < environment < command line.
    public static func resolve(_ overrides: DaemonOverrides,
                               environment: [String: String] = ProcessInfo.processInfo.environment)
        throws(ConfigurationError) -> DaemonConfiguration
    {
        var configuration = DaemonConfiguration(environment: environment)
        if let file = overrides.configFile ?? environment["BLUESKYD_CONFIG"] {
            try configuration.apply(tomlFile: file)
        } else if let file = defaultConfigFile(environment: environment),
                  FileManager.default.fileExists(atPath: file) {
            try configuration.apply(tomlFile: file)
        }
        try configuration.apply(environment: environment)
        if let v = overrides.stateDirectory { configuration.stateDirectory = v }
        if let v = overrides.socketPath { configuration.socketPath = v }
        if let v = overrides.gatewaySocket { configuration.gatewaySocket = v }
        if let v = overrides.metricsSocket { configuration.metricsSocket = v }
        if let v = overrides.metricsListen {
            configuration.metricsListen = try parseGatewayListen(v, key: "--metrics-listen", file: nil, line: nil)
        }
        if let v = overrides.gatewayListen {
            configuration.gatewayListen = try parseGatewayListen(v, key: "--gateway-listen", file: nil, line: nil)
        }
        if let v = overrides.logLevel {
            configuration.logLevel = try parseLogLevel(v, key: "--log-level", file: nil, line: nil)
        }
        if let v = overrides.logTarget {
            configuration.logTarget = try parseLogTarget(v, key: "--log-target", file: nil, line: nil)
        }
        if !overrides.nameservers.isEmpty { configuration.nameservers = overrides.nameservers }
        if let v = overrides.plcURL { configuration.plcURL = v }
        if let v = overrides.caFile { configuration.extraCAFile = v }
        if overrides.allowInsecureLoopback { configuration.allowInsecureLoopback = true }
        try configuration.oauthClient.validate()
        return configuration
    }

    /// `$XDG_CONFIG_HOME/blueskyd/blueskyd.toml` (or `~/.config/...`).
    static func defaultConfigFile(environment: [String: String]) -> String? {
        if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") {
            return config + "/blueskyd/blueskyd.toml"
        }
        return environment["HOME"].map { $0 + "/.config/blueskyd/blueskyd.toml" }
    }
}

/// The body of `blueskyd`: resolve the configuration, start logging, run until stopped.
public enum DaemonMain {
    /// The configuration, or nil once its error is said on standard error as `command`'s.
    static func configuration(_ overrides: DaemonOverrides, command: String) -> DaemonConfiguration? {
        do {
            return try DaemonConfiguration.resolve(overrides)
        } catch {
            FileHandle.standardError.write(Data("\(command): configuration error: \(error)\n".utf8))
            return nil
        }
    }

    public static func run(_ overrides: DaemonOverrides) async -> Int32 {
        guard let configuration = configuration(overrides, command: "blueskyd") else { return DaemonExitCode.configuration.rawValue }
        let level = LogLevelControl(configuration.logLevel)
        LogSetup.bootstrap(target: configuration.logTarget, level: level, identifier: "blueskyd")
        let logger = Logger(label: "blueskyd")
        do {
            let daemon = Daemon(configuration: configuration, logger: logger, logLevel: level,
                                readConfiguration: { () throws(ConfigurationError) in try DaemonConfiguration.resolve(overrides) })
            try await daemon.run()
            return DaemonExitCode.ok.rawValue
        } catch {
            FileHandle.standardError.write(Data("blueskyd: \(error)\n".utf8))
            return error.exitCode.rawValue
        }
    }
}
