import ATTestbed
import Foundation
import Synchronization

/// What every host of a shared PostgreSQL store needs, as a deployment provisions it: one
/// configuration (the store's URL, a password file, a tenant) and the same store key.
public enum SharedStoreHosts {
    /// A random store key as the hex text `store.key` holds.
    public static func randomKeyHex() -> String {
        (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    /// Creates the database `name`, owned by a role of the same name with a random password,
    /// on `server`: its URL (without TLS, as the hosts on this machine reach it) and the password.
    /// The tenant of a host connecting as the owner of `createDatabase`'s default database: row
    /// -level security (forced) holds every role, the owner too, to the tenant of its name.
    public static let ownerTenant = "blueskyd"

    public static func createDatabase(_ name: String = "blueskyd", on server: PostgresServer) throws
        -> (url: String, password: String)
    {
        let password = PostgresServer.randomPassword()
        try server.createDatabase(name, owner: name, password: password)
        return (server.url(user: name, database: name) + "?sslmode=disable", password)
    }

    /// A tenant's own role in `database`, set up as README ("Tenants the database keeps apart")
    /// says, once the owner has migrated the schema: a member of `blueskyd_tenants`, which may
    /// read and write its tenant's rows (row-level security holds each member to the tenant of
    /// its name), take its tenant's turn on the lock table, and read, never write, the migration
    /// record and the seal markers. Returns its password.
    ///
    /// The group is granted once per database: a GRANT changes the tables' rights, which every
    /// session of every other test would wait on and replan for; a new member changes nothing.
    public static func createTenantRole(_ role: String, in database: String, on server: PostgresServer) throws -> String {
        let password = PostgresServer.randomPassword()
        let name = "\"" + role.replacingOccurrences(of: "\"", with: "\"\"") + "\""
        try prepareTenantGroup(in: database, on: server)
        try server.psql("""
            SET log_min_error_statement = panic;
            CREATE ROLE \(name) LOGIN PASSWORD '\(password)' NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB IN ROLE blueskyd_tenants;
            """, database: database)
        return password
    }

    /// Creates the role `blueskyd_tenants` (once per server) and grants it README's rights in
    /// `database` (once per database), after the owner migrated it.
    public static func prepareTenantGroup(in database: String, on server: PostgresServer) throws {
        // Two sessions granting on one table at once fail ("tuple concurrently updated") rather
        // than wait: this process's tests take turns.
        try preparedGroups.withLock { prepared in
            let key = "\(server.socketDirectory):\(server.port)/\(database)"
            guard !prepared.contains(key) else { return }
            try server.psql("""
                DO $$ BEGIN
                    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'blueskyd_tenants') THEN CREATE ROLE blueskyd_tenants NOLOGIN; END IF;
                END $$;
                \(tenantGrants(to: "blueskyd_tenants"))
                """, database: database)
            prepared.insert(key)
        }
    }

    private static let preparedGroups = Mutex<Set<String>>([])

    /// README's grants for a tenant's role `name` (an SQL identifier).
    public static func tenantGrants(to name: String) -> String {
        """
        GRANT USAGE ON SCHEMA public TO \(name);
        GRANT SELECT, INSERT, UPDATE, DELETE ON account, dpop_nonce, oauth_client_key, blueskyd_host, blueskyd_clock TO \(name);
        GRANT SELECT, INSERT, UPDATE ON blueskyd_tenant_lock TO \(name);
        GRANT SELECT, INSERT, UPDATE, DELETE ON blueskyd_tenant_key TO \(name);
        GRANT SELECT ON blueskyd_migration, blueskyd_tenant_sealed TO \(name);
        """
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
    /// `readyTimeout` is a ceiling, not a figure: a debug build loading a tenant of 30,000 rows
    /// while other end-to-end suites share the two cores took more than 30 s.
    public static func startHost(_ index: Int, in directory: String, keyHex: String, config: String, testbed: Testbed?,
                                 extraArguments: [String] = [], logLevel: String = "info",
                                 readyTimeout: Duration = .seconds(90)) async throws -> DaemonProcess {
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
