import BlueskyTesting
import Foundation
import JSONRPC
import Testing

@Suite("Under systemd: readiness and watchdog notifications, reload, socket activation")
struct SystemdIntegrationTests {
    @Test("the notify sequence: READY=1 with STATUS, WATCHDOG=1 pings, RELOADING=1 … READY=1 on SIGHUP, STOPPING=1 on SIGTERM")
    func notifySequence() async throws {
        let directory = try TemporaryDirectory("blueskyd-notify")
        defer { directory.remove() }
        let notify = try NotifySocket(path: directory.file("notify"))
        let daemon = try LaunchedDaemon(
            directory: directory, socketPath: directory.file("run/blueskyd.sock"),
            arguments: ["--state-directory", directory.file("state"), "--socket", directory.file("run/blueskyd.sock")],
            environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "1000000"])
        defer { daemon.runner.terminate() }

        let ready = try await notify.waitFor("READY=1") { $0.hasPrefix("READY=1\n") }
        #expect(notify.messages[ready].contains("\nSTATUS=no accounts yet"), "READY=1 carries the first status: \(notify.messages[ready])")
        // READY=1 means served: the socket answers at once, no polling needed.
        #expect(try await daemon.call("daemon.info")["pid"]?.intValue == Int(daemon.pid))
        let firstPing = try await notify.waitFor(after: ready + 1, "WATCHDOG=1") { $0 == "WATCHDOG=1" }
        try await notify.waitFor(after: firstPing + 1, "a second WATCHDOG=1 (pings repeat)") { $0 == "WATCHDOG=1" }

        daemon.signal(SIGHUP)
        let reloading = try await notify.waitFor(after: firstPing + 1, "RELOADING=1") { $0.hasPrefix("RELOADING=1") }
        let reloaded = try await notify.waitFor(after: reloading + 1, "READY=1 after the reload") { $0.hasPrefix("READY=1") }
        #expect(await daemon.isAnswering, "still serving after the reload")

        daemon.signal(SIGTERM)
        let stopping = try await notify.waitFor(after: reloaded + 1, "STOPPING=1") { $0.hasPrefix("STOPPING=1") }
        #expect(await daemon.runner.waitForExit(timeout: .seconds(30)) == 0, "a clean stop exits 0: \(daemon.log)")

        let kinds = notify.assignments.map { String($0.prefix { $0 != "=" }) }
        #expect(Array(kinds.prefix(2)) == ["READY", "STATUS"], "nothing before READY=1 and its STATUS: \(kinds)")
        #expect(kinds.filter { $0 == "READY" }.count == 2, "READY=1 at start and after the reload: \(kinds)")
        #expect(kinds.filter { $0 == "STOPPING" }.count == 1 && notify.messages.count == stopping + 1,
                "STOPPING=1 is the last word: \(notify.messages.suffix(3))")
        #expect(!notify.messages[(stopping)...].contains("WATCHDOG=1"))
    }

    @Test("SIGHUP applies the run-time keys, names those needing a restart, and refuses a bad file without changing anything")
    func reload() async throws {
        let directory = try TemporaryDirectory("blueskyd-reload")
        defer { directory.remove() }
        let notify = try NotifySocket(path: directory.file("notify"))
        let config = directory.file("blueskyd.toml")
        let socket = directory.file("run/blueskyd.sock")
        let base = "state_directory = \"\(directory.file("state"))\"\nsocket = \"\(socket)\"\n"
        try (base + "log_level = \"info\"\n").write(toFile: config, atomically: true, encoding: .utf8)
        let daemon = try LaunchedDaemon(directory: directory, socketPath: socket, arguments: ["--config", config],
                                        environment: ["NOTIFY_SOCKET": notify.path])
        defer { daemon.runner.terminate() }
        var seen = try await notify.waitFor("READY=1") { $0.hasPrefix("READY=1") }
        try await daemon.call("daemon.info")
        #expect(daemon.logCount("connection opened") == 0, "debug lines are off at info")

        // A good file: the log level and the refresh limit change now, the socket at the next start.
        try (base.replacingOccurrences(of: "blueskyd.sock", with: "other.sock")
             + "log_level = \"debug\"\nmax_concurrent_refreshes = 2\n").write(toFile: config, atomically: true, encoding: .utf8)
        seen = try await reloadAndWait(daemon, notify, after: seen)
        #expect(notify.messages[seen].contains("restart to apply: socket"), "\(notify.messages[seen])")
        #expect(daemon.log.contains("configuration reloaded; some changes need a restart"))
        #expect(daemon.log.contains("applied=max_concurrent_refreshes, log_level") && daemon.log.contains("needsRestart=socket"),
                "\(daemon.log)")
        try await daemon.call("daemon.info")
        #expect(daemon.logCount("connection opened") >= 1, "debug lines are on after the reload")
        #expect(!FileManager.default.fileExists(atPath: directory.file("run/other.sock")), "the socket moves only on restart")

        // A bad file: refused with the key and its line; the daemon keeps its configuration.
        try (base + "log_level = \"loud\"\n").write(toFile: config, atomically: true, encoding: .utf8)
        seen = try await reloadAndWait(daemon, notify, after: seen)
        let status = notify.messages[seen]
        #expect(status.contains("reload refused") && status.contains("\(config):3: log_level"), "\(status)")
        #expect(daemon.log.contains("configuration reload refused; still running on the previous configuration"))
        let before = daemon.logCount("connection opened")
        try await daemon.call("daemon.info")
        #expect(daemon.logCount("connection opened") > before, "still at debug: nothing changed")

        #expect(await daemon.stop() == 0)
        #expect(!FileManager.default.fileExists(atPath: socket), "the socket blueskyd made is removed at stop")
    }

    /// SIGHUP, then waits for RELOADING=1 and the READY=1 that ends it; returns the latter's index.
    private func reloadAndWait(_ daemon: LaunchedDaemon, _ notify: NotifySocket, after: Int) async throws -> Int {
        daemon.signal(SIGHUP)
        let reloading = try await notify.waitFor(after: after + 1, "RELOADING=1") { $0.hasPrefix("RELOADING=1") }
        return try await notify.waitFor(after: reloading + 1, "READY=1 after RELOADING=1") { $0.hasPrefix("READY=1") }
    }

    @Test("socket activation: systemd-socket-activate holds the socket, blueskyd starts on the first connection and serves it")
    func socketActivation() async throws {
        let activator = "/usr/bin/systemd-socket-activate"
        try #require(FileManager.default.isExecutableFile(atPath: activator), "\(activator) is needed (package systemd)")
        let directory = try TemporaryDirectory("blueskyd-activated")
        defer { directory.remove() }
        try FileManager.default.createDirectory(atPath: directory.file("run"), withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let socket = directory.file("run/blueskyd.sock")
        let gateway = directory.file("run/xrpc.sock")
        // A [[client]] socket as blueskyd-client@reader.socket passes it: named "reader".
        let reader = directory.file("run/reader.sock")
        let config = directory.file("blueskyd.toml")
        try "[[client]]\nname = \"reader\"\nsocket = \"\(directory.file("run/unused.sock"))\"\npolicy = \"read\"\n"
            .write(toFile: config, atomically: true, encoding: .utf8)
        let daemon = try LaunchedDaemon(
            directory: directory, socketPath: socket, executable: activator,
            arguments: ["--listen=\(socket)", "--listen=\(gateway)", "--listen=\(reader)", "--fdname=blueskyd:xrpc:reader",
                        "--setenv=HOME=\(directory.path)", Binaries.path("blueskyd"), "--config", config,
                        "--state-directory", directory.file("state"), "--log-level", "debug"])
        defer { daemon.runner.terminate() }
        let deadline = ContinuousClock.now + .seconds(30)
        while !FileManager.default.fileExists(atPath: socket), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(!daemon.log.contains("blueskyd started"), "nothing runs before the first connection")

        // The first connection waits in the listen queue while blueskyd starts, then is served.
        let info = try await daemon.call("daemon.info")
        #expect(info["pid"]?.intValue == Int(daemon.pid), "the launcher exec'd blueskyd in its own process")
        #expect(info["socket"]?.stringValue == socket, "daemon.info names the inherited socket's path")
        #expect(daemon.log.contains("socketActivated=true"), "\(daemon.log)")
        #expect(try await daemon.call("daemon.status")["accounts"] == 0)
        // The gateway serves the socket named "xrpc" (blueskyd-xrpc.socket), not a path of its own.
        #expect(info["gatewaySocket"]?.stringValue == gateway, "\(info)")
        // Not curl: Foundation does not reap a child the test starts while a launcher it started
        // runs (curl stays a zombie, unnoticed).
        let health = try await RawHTTPExchange.get(socketPath: gateway, "/xrpc/_health")
        #expect(health.hasPrefix("HTTP/1.1 200 OK") && health.contains("\"version\""), "\(health)")
        // The client's socket is the one passed, held to its policy; its configured path is not bound.
        #expect(try await ClientPolicyTests.call(reader, "daemon.info").get()["pid"]?.intValue == Int(daemon.pid))
        let refused = try await ClientPolicyTests.call(reader, "accounts.add", ["identifier": "a.test", "password": "x"])
        #expect(refused.failure?.name == "PolicyDenied" && refused.failure?.data["client"]?.stringValue == "reader")
        #expect(!FileManager.default.fileExists(atPath: directory.file("run/unused.sock")))

        #expect(await daemon.stop() == 0, "\(daemon.log)")
        #expect(FileManager.default.fileExists(atPath: socket), "the socket belongs to the service manager: left in place")
        #expect(FileManager.default.fileExists(atPath: gateway), "so does the gateway's")
    }
}

extension LaunchedDaemon {
    /// True when daemon.info succeeds right now.
    var isAnswering: Bool {
        get async { (try? await call("daemon.info")) != nil }
    }
}
