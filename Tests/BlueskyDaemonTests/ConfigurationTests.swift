import Foundation
import Testing
@testable import BlueskyDaemon

@Suite("Configuration: file, environment, command line")
struct ConfigurationTests {
    let environment = ["HOME": "/home/u", "XDG_RUNTIME_DIR": "/run/user/1000", "XDG_STATE_HOME": "/home/u/.state"]

    @Test("the shipped etc/blueskyd.toml parses and says exactly the defaults")
    func shippedExampleIsTheDefaults() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        var configuration = DaemonConfiguration(environment: environment)
        try configuration.apply(tomlFile: root.appendingPathComponent("etc/blueskyd.toml").path)
        #expect(configuration == DaemonConfiguration(environment: environment))
        // Uncommenting every key must parse too, and give the documented default values.
        let text = try String(contentsOf: root.appendingPathComponent("etc/blueskyd.toml"), encoding: .utf8)
        let uncommented = text.split(separator: "\n").map { line in
            line.hasPrefix("#") && line.contains(" = ") && !line.hasPrefix("# ") ? String(line.dropFirst()) : String(line)
        }.joined(separator: "\n")
        var explicit = DaemonConfiguration(environment: environment)
        try explicit.apply(toml: uncommented, file: "example")
        #expect(explicit.plcURL == "https://plc.directory")
        #expect(explicit.maxLineBytes == 64 << 20)
        #expect(explicit.refreshAhead == .seconds(300))
        #expect(explicit.logLevel == .info)
    }

    @Test("an unknown key is refused with its name and line")
    func unknownKey() {
        var configuration = DaemonConfiguration(environment: environment)
        #expect {
            try configuration.apply(toml: "log_level = \"debug\"\n\nrefresh_ahead = 5\n", file: "/etc/b.toml")
        } throws: { error in
            "\(error)" == "/etc/b.toml:3: unknown key 'refresh_ahead'"
        }
    }

    @Test("a value of the wrong type is refused with the key, its line and what was expected")
    func badValues() {
        var configuration = DaemonConfiguration(environment: environment)
        #expect {
            try configuration.apply(toml: "max_line_bytes = \"big\"\n", file: "c.toml")
        } throws: { error in
            "\(error)".hasPrefix("c.toml:1: max_line_bytes: expected a whole number")
        }
        #expect {
            try configuration.apply(toml: "log_level = \"loud\"\n", file: "c.toml")
        } throws: { error in
            "\(error)".contains("log_level")
        }
        #expect {
            try configuration.apply(toml: "nameservers = \"1.1.1.1\"\n", file: "c.toml")
        } throws: { error in
            "\(error)".contains("an array of strings")
        }
        #expect {
            try configuration.apply(toml: "this is not toml", file: "c.toml")
        } throws: { error in
            "\(error)".hasPrefix("c.toml:1:")
        }
    }

    @Test("command line beats environment beats file beats defaults")
    func precedence() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cfg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("b.toml").path
        try "socket = \"/from/file\"\nlog_level = \"debug\"\nplc_url = \"https://plc.file\"\n".write(toFile: file, atomically: true, encoding: .utf8)
        var env = environment
        env["BLUESKYD_CONFIG"] = file
        env["BLUESKYD_SOCKET"] = "/from/env"
        var overrides = DaemonOverrides()
        var configuration = try DaemonConfiguration.resolve(overrides, environment: env)
        #expect(configuration.socketPath == "/from/env")
        #expect(configuration.logLevel == .debug)
        #expect(configuration.plcURL == "https://plc.file")
        #expect(configuration.stateDirectory == "/home/u/.state/blueskyd")
        overrides.socketPath = "/from/cli"
        configuration = try DaemonConfiguration.resolve(overrides, environment: env)
        #expect(configuration.socketPath == "/from/cli")
    }
}
