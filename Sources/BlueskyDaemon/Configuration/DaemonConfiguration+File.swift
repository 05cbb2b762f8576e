import Foundation
import Logging
import SystemdGlue
import TOMLKit

extension DaemonConfiguration {
    /// The keys of the configuration file, in the order `etc/blueskyd.toml` documents them.
    static let fileKeys = [
        "state_directory", "socket", "gateway_socket", "gateway_listen", "metrics_socket", "metrics_listen", "metrics_per_account", "max_line_bytes", "max_requests_per_connection", "nameservers",
        "plc_url", "ca_file", "allow_insecure_loopback", "refresh_ahead_seconds", "retry_initial_seconds",
        "retry_max_seconds", "max_concurrent_refreshes", "max_concurrent_refreshes_per_host", "upstream_timeout_seconds", "log_level",
        "log_target", "oauth_client_id", "oauth_redirect_uri", "oauth_client_auth", "oauth_scope",
        "oauth_client_name", "oauth_client_uri", "store_url", "store_password_file", "tenant", "host_name",
        "lease_seconds", "store_connections", "client", "provider",
    ]

    /// Applies a TOML configuration file over the current values. Unknown keys and values of
    /// the wrong type are refused, naming the key and its line.
    public mutating func apply(tomlFile path: String) throws(ConfigurationError) {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ConfigurationError("\(path): cannot read the configuration file")
        }
        try apply(toml: text, file: path)
    }

    mutating func apply(toml text: String, file: String?) throws(ConfigurationError) {
        let table: TOMLTable
        do {
            table = try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            throw ConfigurationError("\(ConfigurationError.location(file, error.source.begin.line))\(error.description)")
        } catch {
            throw ConfigurationError("\(file ?? "configuration"): \(error)")
        }
        let reader = ConfigurationFileReader(table: table, text: text, file: file)
        for key in table.keys where !Self.fileKeys.contains(key) {
            throw ConfigurationError("\(ConfigurationError.location(file, reader.line(of: key)))unknown key '\(key)'")
        }
        if let v = try reader.string("state_directory") { stateDirectory = v }
        if let v = try reader.string("socket") { socketPath = v }
        if let v = try reader.string("gateway_socket") { gatewaySocket = v }
        if let v = try reader.string("metrics_socket") { metricsSocket = v }
        if let v = try reader.string("gateway_listen") {
            gatewayListen = try Self.parseGatewayListen(v, key: "gateway_listen", file: file, line: reader.line(of: "gateway_listen"))
        }
        if let v = try reader.string("metrics_listen") {
            metricsListen = try Self.parseGatewayListen(v, key: "metrics_listen", file: file, line: reader.line(of: "metrics_listen"))
        }
        if let v = try reader.bool("metrics_per_account") { metricsPerAccount = v }
        if let v = try reader.int("max_line_bytes", min: 1024) { maxLineBytes = v }
        if let v = try reader.int("max_requests_per_connection", min: 1) { maxRequestsPerConnection = v }
        if let v = try reader.strings("nameservers") { nameservers = v }
        if let v = try reader.string("plc_url") { plcURL = v }
        if let v = try reader.string("ca_file") { extraCAFile = v.isEmpty ? nil : v }
        if let v = try reader.bool("allow_insecure_loopback") { allowInsecureLoopback = v }
        if let v = try reader.int("refresh_ahead_seconds", min: 1) { refreshAhead = .seconds(v) }
        if let v = try reader.int("retry_initial_seconds", min: 1) { retryInitial = .seconds(v) }
        if let v = try reader.int("retry_max_seconds", min: 1) { retryMax = .seconds(v) }
        if let v = try reader.int("max_concurrent_refreshes", min: 1) { maxConcurrentRefreshes = v }
        if let v = try reader.int("max_concurrent_refreshes_per_host", min: 1) { maxConcurrentRefreshesPerHost = v }
        if let v = try reader.int("upstream_timeout_seconds", min: 1) { upstreamTimeout = .seconds(v) }
        if let v = try reader.string("log_level") { logLevel = try Self.parseLogLevel(v, key: "log_level", file: file, line: reader.line(of: "log_level")) }
        if let v = try reader.string("log_target") { logTarget = try Self.parseLogTarget(v, key: "log_target", file: file, line: reader.line(of: "log_target")) }
        if let v = try reader.string("store_url") { storeURL = v.isEmpty ? nil : v }
        if let v = try reader.string("store_password_file") { storePasswordFile = v.isEmpty ? nil : v }
        if let v = try reader.string("tenant") { tenant = v.isEmpty ? nil : v }
        if let v = try reader.string("host_name") { hostName = v.isEmpty ? nil : v }
        if let v = try reader.int("lease_seconds", min: 10) { leaseDuration = .seconds(v) }
        if let v = try reader.int("store_connections", min: 1) { storeConnections = v }
        // An empty string means "not set", so a commented default can be filled in partially.
        if let v = try reader.string("oauth_client_id") { oauthClient.clientID = v.isEmpty ? nil : v }
        if let v = try reader.string("oauth_redirect_uri") { oauthClient.redirectURI = v.isEmpty ? nil : v }
        if let v = try reader.string("oauth_client_auth") {
            guard let method = OAuthClientSettings.Authentication(rawValue: v) else {
                throw .badValue("oauth_client_auth", "\"none\" or \"private_key_jwt\"", file: file, line: reader.line(of: "oauth_client_auth"))
            }
            oauthClient.authentication = method
        }
        if let v = try reader.string("oauth_scope") { oauthClient.scope = v }
        if let v = try reader.string("oauth_client_name") { oauthClient.clientName = v.isEmpty ? nil : v }
        if let v = try reader.string("oauth_client_uri") { oauthClient.clientURI = v.isEmpty ? nil : v }
        if let v = table["client"] { clients = try Self.parseClients(v, reader: reader, file: file) }
        if let v = table["provider"] {
            providers = try Self.parseProviders(v, reader: reader, file: file, allowInsecureLoopback: allowInsecureLoopback)
        }
    }

    /// Applies `BLUESKYD_*` environment variables.
    public mutating func apply(environment: [String: String]) throws(ConfigurationError) {
        if let v = environment["BLUESKYD_STATE_DIRECTORY"], !v.isEmpty { stateDirectory = v }
        if let v = environment["BLUESKYD_SOCKET"], !v.isEmpty { socketPath = v }
        if let v = environment["BLUESKYD_GATEWAY_SOCKET"] { gatewaySocket = v }
        if let v = environment["BLUESKYD_METRICS_SOCKET"] { metricsSocket = v }
        if let v = environment["BLUESKYD_GATEWAY_LISTEN"] {
            gatewayListen = try Self.parseGatewayListen(v, key: "BLUESKYD_GATEWAY_LISTEN", file: nil, line: nil)
        }
        if let v = environment["BLUESKYD_METRICS_LISTEN"] {
            metricsListen = try Self.parseGatewayListen(v, key: "BLUESKYD_METRICS_LISTEN", file: nil, line: nil)
        }
        if let v = environment["BLUESKYD_STORE_URL"], !v.isEmpty { storeURL = v }
        if let v = environment["BLUESKYD_LOG_LEVEL"], !v.isEmpty {
            logLevel = try Self.parseLogLevel(v, key: "BLUESKYD_LOG_LEVEL", file: nil, line: nil)
        }
        if let v = environment["BLUESKYD_LOG_TARGET"], !v.isEmpty {
            logTarget = try Self.parseLogTarget(v, key: "BLUESKYD_LOG_TARGET", file: nil, line: nil)
        }
    }

    /// "" is off; otherwise a loopback `host:port`.
    static func parseGatewayListen(_ text: String, key: String, file: String?, line: Int?) throws(ConfigurationError) -> LoopbackAddress? {
        guard !text.isEmpty else { return nil }
        guard let address = LoopbackAddress(text) else {
            throw .badValue(key, "a loopback address and port such as \"127.0.0.1:9583\" or \"[::1]:9583\" (the gateway is never served beyond this machine)",
                            file: file, line: line)
        }
        return address
    }

    static func parseLogTarget(_ text: String, key: String, file: String?, line: Int?) throws(ConfigurationError) -> LogTarget {
        guard let target = LogTarget(rawValue: text.lowercased()) else {
            throw .badValue(key, "one of auto, journal, console", file: file, line: line)
        }
        return target
    }

    static func parseLogLevel(_ text: String, key: String, file: String?, line: Int?) throws(ConfigurationError) -> Logger.Level {
        guard let level = Logger.Level(rawValue: text.lowercased()) else {
            throw .badValue(key, "one of trace, debug, info, notice, warning, error, critical", file: file, line: line)
        }
        return level
    }
}

/// Typed reads of a flat TOML table, with the line of each key for error messages.
struct ConfigurationFileReader {
    let table: TOMLTable
    let text: String
    let file: String?

    /// The first line that assigns `key` (TOMLKit does not report value positions).
    func line(of key: String) -> Int? {
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.drop { $0 == " " || $0 == "\t" }
            guard trimmed.hasPrefix(key) else { continue }
            let rest = trimmed.dropFirst(key.count).drop { $0 == " " || $0 == "\t" }
            if rest.hasPrefix("=") { return index + 1 }
        }
        return nil
    }

    private func fail(_ key: String, _ expected: String) -> ConfigurationError {
        .badValue(key, expected, file: file, line: line(of: key))
    }

    func string(_ key: String) throws(ConfigurationError) -> String? {
        guard let value = table[key] else { return nil }
        guard let s = value.string else { throw fail(key, "a string") }
        return s
    }

    func bool(_ key: String) throws(ConfigurationError) -> Bool? {
        guard let value = table[key] else { return nil }
        guard let b = value.bool else { throw fail(key, "true or false") }
        return b
    }

    func int(_ key: String, min: Int) throws(ConfigurationError) -> Int? {
        guard let value = table[key] else { return nil }
        guard let i = value.int, i >= min else { throw fail(key, "a whole number of at least \(min)") }
        return i
    }

    func strings(_ key: String) throws(ConfigurationError) -> [String]? {
        guard let value = table[key] else { return nil }
        guard let array = value.array else { throw fail(key, "an array of strings") }
        var result: [String] = []
        for element in array {
            guard let s = element.string else { throw fail(key, "an array of strings") }
            result.append(s)
        }
        return result
    }
}
