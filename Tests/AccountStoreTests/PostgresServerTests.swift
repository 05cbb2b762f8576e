import ATTestbed
import BlueskyTesting
import Foundation
import Testing

/// The harness's throwaway PostgreSQL: what the PostgreSQL-backed store tests stand on.
@Suite("PostgreSQL test server")
struct PostgresServerTests {
    /// `psql` over TCP as `user` with `password` (the way the daemon connects): status and output.
    static func tcpPSQL(_ server: PostgresServer, user: String, password: String, database: String,
                        sslmode: String = "disable", sql: String = "SELECT 1") throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
        process.arguments = ["-X", "-At", "-c", sql,
                             "host=\(server.host) port=\(server.port) user=\(user) dbname=\(database) sslmode=\(sslmode)"]
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PG") }
        environment["PGPASSWORD"] = password
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    @Test("starts, creates a role and its database, answers as the admin and as the role, refuses a wrong password")
    func createAndConnect() async throws {
        let server = try await offThePool { try PostgresServer.start() }
        defer { server.destroy() }
        #expect(server.isRunning)
        try server.createDatabase("blueskyd", owner: "blueskyd", password: "s3cret'quote")
        #expect(try server.psql("SELECT 1", database: "blueskyd") == "1")
        #expect(try server.psql("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'blueskyd'",
                                database: "postgres") == "blueskyd")
        #expect(server.url(user: "blueskyd", database: "blueskyd") == "postgresql://blueskyd@127.0.0.1:\(server.port)/blueskyd")

        let good = try Self.tcpPSQL(server, user: "blueskyd", password: "s3cret'quote", database: "blueskyd")
        #expect(good.status == 0 && good.output == "1", "\(good.output)")
        let wrong = try Self.tcpPSQL(server, user: "blueskyd", password: "wrong", database: "blueskyd")
        #expect(wrong.status != 0)
        #expect(wrong.output.contains("password authentication failed"), "\(wrong.output)")
        let admin = try Self.tcpPSQL(server, user: server.adminUser, password: server.adminPassword, database: "postgres")
        #expect(admin.status == 0 && admin.output == "1", "\(admin.output)")
    }

    @Test("a stop and a start on the same port keep committed data, after a fast or an immediate stop")
    func stopAndStartKeepsData() async throws {
        let server = try await offThePool { try PostgresServer.start() }
        defer { server.destroy() }
        try server.createDatabase("kept", owner: "kept_owner", password: "pw")
        try server.psql("CREATE TABLE t (id int PRIMARY KEY, note text); INSERT INTO t VALUES (1, 'one');", database: "kept")

        try await offThePool { try server.stop() }
        #expect(!server.isRunning)
        #expect(throws: PostgresServer.Failure.self) { try server.psql("SELECT 1", database: "kept") }
        try await offThePool { try server.start() }
        #expect(server.isRunning)
        #expect(try server.psql("SELECT note FROM t WHERE id = 1", database: "kept") == "one")

        // An immediate stop is a crash: the start runs recovery and the commit is still there.
        try server.psql("INSERT INTO t VALUES (2, 'two')", database: "kept")
        try await offThePool { try server.stop(mode: .immediate) }
        try await offThePool { try server.start() }
        #expect(try server.psql("SELECT string_agg(note, ',' ORDER BY id) FROM t", database: "kept") == "one,two")
        try await offThePool { try server.restart() }
        #expect(try server.psql("SELECT count(*) FROM t", database: "kept") == "2")
    }

    @Test("names outside [a-z0-9_] are refused; a failed statement explains itself with the server log")
    func invalidNamesAndFailures() async throws {
        let server = try await offThePool { try PostgresServer.start() }
        defer { server.destroy() }
        for name in ["Bad", "a-b", "x; DROP DATABASE postgres", "", "1abc"] {
            #expect(throws: PostgresServer.Failure.self) { try server.createDatabase(name, owner: "ok", password: "pw") }
            #expect(throws: PostgresServer.Failure.self) { try server.createDatabase("ok", owner: name, password: "pw") }
        }
        do {
            try server.psql("SELECT * FROM no_such_table", database: "postgres")
            Issue.record("expected a failure")
        } catch let failure as PostgresServer.Failure {
            #expect(failure.description.contains("no_such_table"))
            #expect(failure.description.contains("server log"))
        }
        // A failed CREATE ROLE must not leave the password in the log (whose tail goes into errors).
        try server.createDatabase("dup", owner: "dup", password: "first")
        #expect(throws: PostgresServer.Failure.self) { try server.createDatabase("dup2", owner: "dup", password: "hunter2pw") }
        #expect(!server.log.contains("hunter2pw"))
        #expect(!server.log.contains(server.adminPassword))
    }

    @Test("destroy stops the server and removes its directory")
    func destroyRemovesEverything() async throws {
        let server = try await offThePool { try PostgresServer.start() }
        let directory = server.directory
        #expect(FileManager.default.fileExists(atPath: server.dataDirectory + "/PG_VERSION"))
        server.destroy()
        #expect(!server.isRunning)
        #expect(!FileManager.default.fileExists(atPath: directory))
        server.destroy()  // idempotent
    }

    @Test("servers started side by side answer while they restart: no wait hangs on a child another spawn inherited",
          .timeLimit(.minutes(2)))
    func sideBySide() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<3 {
                group.addTask {
                    try await offThePool {
                        let server = try PostgresServer.start()
                        defer { server.destroy() }
                        for round in 0..<3 {
                            #expect(try server.psql("SELECT \(round)", database: "postgres") == "\(round)")
                            try server.restart()
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    @Test("with TLS files the server speaks TLS, and only TLS to TCP clients")
    func tls() async throws {
        let certificates = try TestbedCertificates(domain: "db.test", bindAddress: "127.0.0.1")
        let files = PostgresServer.TLSFiles(certificatePEM: certificates.serverCertificatePEM,
                                            privateKeyPEM: certificates.serverPrivateKeyPEM)
        let server = try await offThePool { try PostgresServer.start(tls: files) }
        defer { server.destroy() }
        try server.createDatabase("tls", owner: "tls", password: "pw")
        let result = try Self.tcpPSQL(server, user: "tls", password: "pw", database: "tls", sslmode: "require",
                                      sql: "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        #expect(result.status == 0 && result.output == "t", "\(result.output)")
        let plain = try Self.tcpPSQL(server, user: "tls", password: "pw", database: "tls", sslmode: "disable")
        #expect(plain.status != 0 && plain.output.contains("no encryption"), "\(plain.output)")
    }
}
