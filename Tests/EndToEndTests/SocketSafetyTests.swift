import BlueskyTesting
import Foundation
import JSONRPC
import Testing

@Suite("The socket: bad input, other users, a second daemon")
struct SocketSafetyTests {
    @Test("malformed, oversized and wrong requests each get their error; the connection and others keep working")
    func badInputGetsErrors() async throws {
        let directory = try TemporaryDirectory("blueskyd-bad-input")
        defer { directory.remove() }
        // A 1 MiB line limit (the default is 64 MiB), so that an oversized line is quick to send.
        try "max_line_bytes = 1048576\n".write(toFile: directory.file("blueskyd.toml"), atomically: true, encoding: .utf8)
        let daemon = try await DaemonProcess(directory: directory.path, testbed: nil,
                                             extraArguments: ["--config", directory.file("blueskyd.toml")])
        try await withTearDown { await daemon.stop() } run: {
            let client = try RPCClientConnection(socketPath: daemon.socketPath, timeout: .seconds(30))
            defer { client.close() }
            let bystander = try RPCClientConnection(socketPath: daemon.socketPath, timeout: .seconds(30))
            defer { bystander.close() }

            func exchange(_ line: String) throws -> JSONValue {
                try client.send(rawLine: line)
                let reply = try #require(try client.readLine())
                return try JSONValue.parse(Array(reply.utf8))
            }
            func errorName(_ reply: JSONValue) -> String? { reply["error"]?["data"]?["name"]?.stringValue }

            #expect(errorName(try exchange("{this is not json")) == "ParseError")
            #expect(errorName(try exchange(String(repeating: "x", count: 2 << 20))) == "LineTooLong")
            #expect(errorName(try exchange(#"{"jsonrpc":"2.0","id":1,"method":"no.such.method"}"#)) == "MethodNotFound")
            #expect(errorName(try exchange(#"{"jsonrpc":"1.0","id":2,"method":"daemon.info"}"#)) == "InvalidRequest")
            let badParams = try exchange(#"{"jsonrpc":"2.0","id":3,"method":"accounts.add","params":{"identifier":5,"password":"x"}}"#)
            #expect(errorName(badParams) == "InvalidParams")
            #expect(badParams["error"]?["data"]?["field"] == "identifier")
            #expect(errorName(try exchange(#"{"jsonrpc":"2.0","id":4,"method":"xrpc.call","params":{"nsid":"app.bsky.actor.getProfile","account":"nobody.example.com"}}"#)) == "AccountNotFound")
            #expect(errorName(try exchange(#"{"jsonrpc":"2.0","id":5,"method":"xrpc.call","params":{"nsid":"app.bsky.actor.getProfile"}}"#)) == "NoDefaultAccount")
            let unknownNSID = try exchange(#"{"jsonrpc":"2.0","id":6,"method":"xrpc.call","params":{"nsid":"com.example.custom.thing"}}"#)
            #expect(errorName(unknownNSID) == "InvalidParams" && unknownNSID["error"]?["data"]?["field"] == "kind")
            #expect(errorName(try exchange(#"{"jsonrpc":"2.0","id":7,"method":"xrpc.call","params":{"nsid":"not an nsid"}}"#)) == "InvalidParams")
            #expect(errorName(try exchange("[]")) == "EmptyBatch")

            // After all that, this connection and a bystander both still work.
            #expect(try exchange(#"{"jsonrpc":"2.0","id":8,"method":"daemon.info"}"#)["result"]?["name"] == "blueskyd")
            #expect(try bystander.call(method: "daemon.status").get()["accounts"] == 0)
            #expect(daemon.isRunning)
        }
    }

    @Test("a client of another uid is refused by the peer-credential check")
    func otherUIDRefused() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
                     "setpriv is needed to run blueskyd as another user; install util-linux")
        try #require(getuid() == 0, """
            THIS TEST CANNOT SWITCH UID: it must run as root (make test does, in CI) to start blueskyd as \
            'nobody' and connect as root. The peer-credential check is NOT verified in this run.
            """)
        let directory = try TemporaryDirectory("blueskyd-peercred")
        defer { directory.remove() }
        // blueskyd runs as nobody; root can open nobody's 0600 socket, so only SO_PEERCRED stops it.
        let daemon = try await DaemonProcess(directory: directory.path, testbed: nil, asUser: (65534, 65534))
        try await withTearDown { await daemon.stop() } run: {
            let info = try await CommandResult.run("/usr/bin/setpriv", [
                "--reuid=65534", "--regid=65534", "--clear-groups", Binaries.path("bskyctl"),
                "--socket", daemon.socketPath, "status", "--json",
            ])
            #expect(info.status == 0, "the daemon's own user is served (--socket may come first): \(info.stderr)")
            let refused = try await CommandResult.run(Binaries.path("bskyctl"), ["status", "--socket", daemon.socketPath])
            #expect(refused.status == 77, "root is refused with exit 77: \(refused.stdout) \(refused.stderr)")
            #expect(refused.stderr.contains("permission denied") && refused.stderr.contains("uid 65534"),
                    "bskyctl itself refuses a daemon of another user: \(refused.stderr)")
            // The daemon refuses the connection on its side too, and says so in its log.
            _ = await eventually(timeout: .seconds(10)) { daemon.log.contains("refused a connection from another user") }
            #expect(daemon.log.contains("refused a connection from another user") && daemon.log.contains("peer.uid=0"),
                    "the refusal is logged with the peer's uid")

            // A socket that another user put in our place is never sent a password.
            let impostor = try SpawnedProcess("/usr/bin/setpriv", [
                "--reuid=65534", "--regid=65534", "--clear-groups", "--", "/usr/bin/socat", "-u",
                "UNIX-LISTEN:\(directory.path)/impostor.sock,fork", "OPEN:\(directory.path)/impostor.out,creat,append",
            ], outputFile: directory.path + "/impostor.log")
            defer { impostor.terminate() }
            _ = await eventually(timeout: .seconds(10)) { FileManager.default.fileExists(atPath: directory.path + "/impostor.sock") }
            let login = try await CommandResult.run(Binaries.path("bskyctl"), [
                "login", "alice.tb1.test", "--app-password", "--socket", directory.path + "/impostor.sock",
            ], stdin: "secret-app-password\n")
            #expect(login.status == 77, "a socket served by another uid is refused: \(login.stderr)")
            let received = (try? String(contentsOfFile: directory.path + "/impostor.out", encoding: .utf8)) ?? ""
            #expect(!received.contains("secret-app-password"), "the impostor received nothing")
        }
    }

    @Test("a second daemon on the same state directory exits at once; a live socket is never replaced")
    func secondDaemonRefused() async throws {
        let directory = try TemporaryDirectory("blueskyd-single")
        defer { directory.remove() }
        let daemon = try await DaemonProcess(directory: directory.path, testbed: nil)
        try await withTearDown { await daemon.stop() } run: {
            let second = try await CommandResult.run(Binaries.path("blueskyd"), daemon.arguments)
            #expect(second.status == 75, "exit 75: \(second.stderr)")
            #expect(second.stderr.contains("already"), "a clear message: \(second.stderr)")
            let other = try TemporaryDirectory("blueskyd-single-other")
            defer { other.remove() }
            let thief = try await CommandResult.run(Binaries.path("blueskyd"), [
                "--state-directory", other.path, "--socket", daemon.socketPath])
            #expect(thief.status == 75, "another state directory cannot take a live socket (exit 75): \(thief.stderr)")
            #expect(try await daemon.call("daemon.info")["pid"]?.intValue == Int(daemon.pid), "the first daemon still answers")
        }
    }
}
