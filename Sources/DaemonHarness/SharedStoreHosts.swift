import ATTestbed
import Foundation

/// What every host of a shared PostgreSQL store needs, as a deployment provisions it: one
/// configuration (the store's URL, a password file, a tenant) and the same store key.
public enum SharedStoreHosts {
    /// A random store key as the hex text `store.key` holds.
    public static func randomKeyHex() -> String {
        (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    /// Creates the database `name`, owned by a role of the same name with a random password,
    /// on `server`: its URL (without TLS, as the hosts on this machine reach it) and the password.
    public static func createDatabase(_ name: String = "blueskyd", on server: PostgresServer) throws
        -> (url: String, password: String)
    {
        let password = PostgresServer.randomPassword()
        try server.createDatabase(name, owner: name, password: password)
        return (server.url(user: name, database: name) + "?sslmode=disable", password)
    }

    /// A tenant's own role in `database`, set up as README ("Tenants the database keeps apart")
    /// says: it may read and write the tables (those there now and those the owner's later
    /// migrations create), and row-level security holds it to the rows of the tenant of its
    /// name. Returns its password.
    public static func createTenantRole(_ role: String, in database: String, owner: String? = nil,
                                        on server: PostgresServer) throws -> String {
        let password = PostgresServer.randomPassword()
        try server.psql("""
            SET log_min_error_statement = panic;
            CREATE ROLE \(role) LOGIN PASSWORD '\(password)';
            GRANT USAGE ON SCHEMA public TO \(role);
            GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO \(role);
            ALTER DEFAULT PRIVILEGES FOR ROLE \(owner ?? database) IN SCHEMA public
                GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO \(role);
            """, database: database)
        return password
    }

    /// Writes `<directory>/blueskyd.toml` (with `extraLines`) and the password file beside it,
    /// readable by its owner only; returns the configuration's path.
    public static func writeConfiguration(in directory: String, url: String, password: String, tenant: String,
                                          extraLines: [String] = []) throws -> String {
        let passwordFile = directory + "/store-password"
        try (password + "\n").write(toFile: passwordFile, atomically: true, encoding: .utf8)
        chmod(passwordFile, 0o600)
        let config = directory + "/blueskyd.toml"
        let lines = ["store_url = \"\(url)\"", "store_password_file = \"\(passwordFile)\"", "tenant = \"\(tenant)\""]
            + extraLines
        try (lines.joined(separator: "\n") + "\n").write(toFile: config, atomically: true, encoding: .utf8)
        return config
    }

    /// Starts host `index` in `<directory>/host<index>` with the shared key and configuration.
    public static func startHost(_ index: Int, in directory: String, keyHex: String, config: String, testbed: Testbed?,
                                 extraArguments: [String] = [], logLevel: String = "info",
                                 readyTimeout: Duration = .seconds(30)) async throws -> DaemonProcess {
        let hostDirectory = directory + "/host\(index)"
        try provisionKey(keyHex, stateDirectory: hostDirectory + "/state")
        return try await DaemonProcess(directory: hostDirectory, testbed: testbed,
                                       extraArguments: extraArguments + ["--config", config], logLevel: logLevel,
                                       readyTimeout: readyTimeout)
    }

    /// The tokens each host rotated and saved since it started (`daemon.status`), in order.
    public static func tokensRotated(_ hosts: [DaemonProcess]) async throws -> [Int] {
        var rotated: [Int] = []
        for host in hosts { rotated.append(try await host.call("daemon.status")["tokensRotated"]?.intValue ?? 0) }
        return rotated
    }

    /// Puts the shared key in a host's state directory (created, private).
    public static func provisionKey(_ hex: String, stateDirectory: String) throws {
        try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let file = stateDirectory + "/store.key"
        guard FileManager.default.createFile(atPath: file, contents: Data(hex.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: file])
        }
    }
}
