import ATTestbed
import BlueskyTesting
import DaemonHarness
import Foundation
import JSONRPC
import Testing

/// Least privilege: `[[client]]` sockets held to a policy in atproto's permission syntax, and
/// `bskyctl exec`'s gateway tokens.
@Suite("Client policies and bskyctl exec: each program gets only the powers it needs")
struct ClientPolicyTests {
    static func config(_ directory: TemporaryDirectory, poster: String) -> String {
        """
        [[client]]
        name = "reader"
        socket = "\(directory.file("reader.sock"))"
        gateway_socket = "\(directory.file("reader-xrpc.sock"))"
        policy = "read"

        [[client]]
        name = "poster"
        socket = "\(directory.file("poster.sock"))"
        policy = "read repo:app.bsky.feed.post?action=create"
        accounts = ["\(poster)"]
        """
    }

    /// One JSON-RPC call on `socket`: its result or its error.
    static func call(_ socket: String, _ method: String, _ params: JSONValue? = nil) async throws -> Result<JSONValue, RPCError> {
        try await offThePool {
            let connection = try RPCClientConnection(socketPath: socket, timeout: .seconds(60))
            defer { connection.close() }
            return try connection.call(method: method, params: params)
        }
    }

    static func post(_ did: String, _ text: String) -> JSONValue {
        ["repo": .string(did), "collection": "app.bsky.feed.post",
         "record": ["$type": "app.bsky.feed.post", "text": .string(text), "createdAt": "2026-11-27T00:00:00Z"]]
    }

    @Test("a read-only socket reads but cannot write, delete or mint service tokens; an account-limited one cannot reach another account; each refusal names its rule; writes reach the journal with pid and program")
    func restrictedSockets() async throws {
        let sockets = try TemporaryDirectory("blueskyd-clients")
        defer { sockets.remove() }
        try await EndToEndFixture.with(logLevel: "info", daemonConfigFile: { Self.config(sockets, poster: "bob.\($0.configuration.domain)") }) { fixture in
            try await fixture.loginAll()
            let (alice, bob, testbed) = (fixture.accounts[0], fixture.accounts[1], fixture.testbed)
            let reader = sockets.file("reader.sock"), poster = sockets.file("poster.sock")
            for socket in [reader, poster, sockets.file("reader-xrpc.sock")] {
                let mode = try FileManager.default.attributesOfItem(atPath: socket)[.posixPermissions] as? Int
                #expect(mode == 0o600, "\(socket)")
            }

            // Reading works, as on the main socket.
            let profile = try await Self.call(reader, "xrpc.call", ["nsid": "app.bsky.actor.getProfile", "params": ["actor": .string(bob.did)]]).get()
            #expect(profile["status"]?.intValue == 200)

            // Writing, deleting and service tokens are refused before anything is sent.
            let postsBefore = testbed.recordCount(did: alice.did, collection: "app.bsky.feed.post")
            let created = try await Self.call(reader, "xrpc.call", ["nsid": "com.atproto.repo.createRecord", "input": Self.post(alice.did, "no")])
            let refusal = try #require(created.failure)
            #expect(refusal.name == "PolicyDenied")
            #expect(refusal.data["client"]?.stringValue == "reader")
            #expect(refusal.data["rule"]?.stringValue == "policy = \"read\"")
            #expect(refusal.data["permission"]?.stringValue == "repo:app.bsky.feed.post?action=create")
            let deleted = try await Self.call(reader, "xrpc.call", ["nsid": "com.atproto.repo.deleteRecord", "input": [
                "repo": .string(alice.did), "collection": "app.bsky.feed.post", "rkey": "3kabc"]])
            #expect(deleted.failure?.data["permission"]?.stringValue == "repo:app.bsky.feed.post?action=delete")
            let serviceToken = try await Self.call(reader, "xrpc.call", ["nsid": "com.atproto.server.getServiceAuth",
                                                                          "params": ["aud": "did:web:video.bsky.app"]])
            #expect(serviceToken.failure?.name == "PolicyDenied")
            #expect(testbed.recordCount(did: alice.did, collection: "app.bsky.feed.post") == postsBefore)
            // Nor does it manage accounts.
            let removal = try await Self.call(reader, "accounts.remove", ["account": .string(alice.did)])
            #expect(removal.failure?.name == "PolicyDenied" && removal.failure?.data["permission"]?.stringValue == "accounts.remove")
            #expect(try await fixture.listedAccounts().count == 2)

            // The gateway socket of the same client: HTTP 403 with the same names.
            let gatewayRefusal = try await GatewayTests.curl(sockets.file("reader-xrpc.sock"), "/xrpc/com.atproto.repo.createRecord", [
                "-H", "Content-Type: application/json", "--data", String(decoding: Self.post(alice.did, "no").encoded(), as: UTF8.self),
            ])
            #expect(gatewayRefusal.status == 403 && gatewayRefusal.error == "PolicyDenied", "\(gatewayRefusal.body)")
            #expect(gatewayRefusal.json?["permission"]?.stringValue == "repo:app.bsky.feed.post?action=create")

            // The poster: bob only (fixed as its account), posts only.
            let listed = try await Self.call(poster, "accounts.list").get()
            #expect(listed["accounts"]?.arrayValue?.compactMap { $0["did"]?.stringValue } == [bob.did])
            let bobsPost = try await Self.call(poster, "xrpc.call", ["nsid": "com.atproto.repo.createRecord", "input": Self.post(bob.did, "hi")]).get()
            #expect(bobsPost["status"]?.intValue == 200, "\(bobsPost)")
            let asAlice = try await Self.call(poster, "xrpc.call", ["nsid": "com.atproto.server.getSession", "account": .string(alice.handle)])
            #expect(asAlice.failure?.name == "PolicyDenied")
            #expect(asAlice.failure?.data["rule"]?.stringValue == "accounts = [\"\(bob.handle)\"]")
            let like = try await Self.call(poster, "xrpc.call", ["nsid": "com.atproto.repo.createRecord", "input": [
                "repo": .string(bob.did), "collection": "app.bsky.feed.like", "record": ["$type": "app.bsky.feed.like"]]])
            #expect(like.failure?.data["permission"]?.stringValue == "repo:app.bsky.feed.like?action=create")

            // The journal line of the write: pid, program, account, NSID (this test process made it).
            let line = try #require(fixture.daemon.log.split(separator: "\n").first { $0.contains("xrpc write") && $0.contains("client=poster") })
            #expect(line.contains("pid=\(getpid())"), "\(line)")
            #expect(line.contains("exe=\(try Self.ownExecutable())"), "\(line)")
            let bobID = try #require(try await listedBob(fixture, bob.did))
            #expect(line.contains("account=\(bobID)"), "\(line)")
            #expect(line.contains("nsid=com.atproto.repo.createRecord") && !line.contains("hi"), "\(line)")
        }
    }

    private func listedBob(_ fixture: EndToEndFixture, _ did: String) async throws -> String? {
        try await fixture.listedAccounts().values.first { $0["did"]?.stringValue == did }?["id"]?.stringValue
    }

    static func ownExecutable() throws -> String {
        try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
    }

    @Test("a policy that cannot be read stops the daemon at start, naming the client and the permission")
    func unreadablePolicy() async throws {
        let directory = try TemporaryDirectory("blueskyd-clients")
        defer { directory.remove() }
        let config = directory.file("blueskyd.toml")
        try """
        [[client]]
        name = "reader"
        socket = "\(directory.file("r.sock"))"
        policy = "repo:app.bsky.feed.post?action=publish"
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let run = try await CommandResult.run(Binaries.path("blueskyd"), [
            "--config", config, "--state-directory", directory.file("state"), "--socket", directory.file("d.sock"),
        ])
        #expect(run.status == 78, "\(run.stderr)")
        #expect(run.stderr.contains("client 'reader'") && run.stderr.contains("action is create, update or delete, not 'publish'"), "\(run.stderr)")
    }

    @Test("bskyctl exec: the program's environment holds no atproto token, only a gateway token held to its policy and revoked when it exits")
    func exec() async throws {
        try await EndToEndFixture.with { fixture in
            try await fixture.loginAll()
            let (alice, testbed) = (fixture.accounts[0], fixture.testbed)
            func exec(_ arguments: [String]) async throws -> CommandResult {
                try await CommandResult.run(Binaries.path("bskyctl"), ["--socket", fixture.daemon.socketPath, "exec"] + arguments)
            }
            // The environment: the gateway and a token, nothing that could pass for an atproto credential.
            let environment = try await exec(["--policy", "read", "--", "env"])
            #expect(environment.status == 0, "\(environment.stderr)")
            let variables = Dictionary(environment.stdout.split(separator: "\n").compactMap { line -> (String, String)? in
                let parts = line.split(separator: "=", maxSplits: 1)
                return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
            }, uniquingKeysWith: { $1 })
            let token = try #require(variables["BLUESKYD_GATEWAY_TOKEN"])
            #expect(token.hasPrefix("bskyd-gw-") && !token.contains("."), "opaque, not a JWT")
            #expect(variables["ATPROTO_PDS_URL"] == "http://localhost/t/\(token)")
            // A socket of its own, never the main one (which serves the daemon's user unrestricted).
            let own = try #require(variables["BLUESKYD_XRPC_SOCKET"])
            #expect(own != fixture.daemon.gatewaySocketPath && own.hasSuffix("/xrpc.sock"), "\(own)")
            #expect(!environment.stdout.contains(fixture.daemon.gatewaySocketPath) && !environment.stdout.contains(fixture.daemon.socketPath))
            #expect(!environment.stdout.contains("eyJ"), "no JWT (access or refresh token) in the environment")
            for account in fixture.accounts { #expect(!environment.stdout.contains(account.appPassword)) }

            // Revoked once the program exited.
            let afterExit = try await GatewayTests.curl(fixture.daemon.gatewaySocketPath, "/xrpc/com.atproto.server.getSession",
                                                        ["-H", "Authorization: Bearer \(token)"])
            #expect(afterExit.status == 401 && afterExit.error == "GatewayTokenInvalid", "\(afterExit.body)")
            let byPath = try await GatewayTests.curl(fixture.daemon.gatewaySocketPath, "/t/\(token)/xrpc/com.atproto.server.getSession")
            #expect(byPath.status == 401)

            // Inside its policy the program's calls work; outside they are refused (and the
            // program's status is bskyctl's).
            let script = """
                curl -s -o /dev/null -w '%{http_code}\\n' --unix-socket "$BLUESKYD_XRPC_SOCKET" "$ATPROTO_PDS_URL/xrpc/com.atproto.server.getSession"
                curl -s -w '\\n%{http_code}\\n' --unix-socket "$BLUESKYD_XRPC_SOCKET" -H 'Content-Type: application/json' \
                  --data '{"repo":"\(alice.did)","collection":"app.bsky.feed.post","record":{"text":"x","createdAt":"2026-11-27T00:00:00Z"}}' \
                  "$ATPROTO_PDS_URL/xrpc/com.atproto.repo.createRecord"
                exit 7
                """
            let before = testbed.recordCount(did: alice.did, collection: "app.bsky.feed.post")
            let confined = try await exec(["--policy", "read", "--account", alice.handle, "--", "/bin/sh", "-c", script])
            #expect(confined.status == 7, "\(confined.stderr)")
            let lines = confined.stdout.split(separator: "\n").map(String.init)
            #expect(lines.first == "200", "\(confined.stdout)")
            #expect(lines.last == "403" && confined.stdout.contains("PolicyDenied"), "\(confined.stdout)")
            #expect(testbed.recordCount(did: alice.did, collection: "app.bsky.feed.post") == before)

            // A policy that cannot be read is refused before anything runs.
            let bad = try await exec(["--policy", "post-things", "--", "true"])
            #expect(bad.status == 64 && bad.stderr.contains("'post-things' is not a permission"), "\(bad.stderr)")
        }
    }

    @Test("the Python atproto SDK under bskyctl exec, pointed at the gateway by the environment alone (loopback TCP, and in the sandbox): within its policy it reads, posts, uploads an image and deletes")
    func sdkUnderExec() async throws {
        try await EndToEndFixture.with(names: ["alice"], daemonArguments: ["--gateway-listen", "127.0.0.1:0"]) { fixture in
            try await fixture.loginAll()
            let alice = fixture.accounts[0]
            let run = try await CommandResult.run(Binaries.path("bskyctl"), [
                "--socket", fixture.daemon.socketPath, "exec", "--account", alice.handle,
                // The SDK declares its uploads as */*: a policy matches the declared media type,
                // so it needs blob:*/* (blob:image/* serves programs that say image/png).
                "--policy", "read repo:app.bsky.feed.post blob:*/*", "--",
                "python3", GatewaySDKTests.script, "--from-env", "--blob-bytes", "200000",
            ])
            #expect(run.status == 0, "\(run.stderr)")
            let result = try #require(run.json, "\(run.stdout) \(run.stderr)")
            #expect(result["did"]?.stringValue == alice.did)
            #expect(result["blobSize"]?.intValue == 200_000)
            #expect(result["deleted"] == true)
            // The same SDK, unmodified, in the sandbox: it reaches the gateway by the URL in its
            // environment, the sandbox's own loopback carried to its socket. The Python it runs on
            // may live in a home directory (pyenv): shown to it, read-only, with --readable.
            let python = try await CommandResult.run("/usr/bin/env", ["python3", "-c", "import sys; print(sys.executable); print(sys.prefix)"])
            let (interpreter, prefix) = try #require({ () -> (String, String)? in
                let lines = python.stdout.split(separator: "\n").map(String.init)
                return lines.count >= 2 ? (lines[0], lines[1]) : nil
            }(), "\(python.stdout) \(python.stderr)")
            let boxed = try await CommandResult.run(Binaries.path("bskyctl"), [
                "--socket", fixture.daemon.socketPath, "exec", "--sandbox", "--readable", prefix, "--account", alice.handle,
                "--policy", "read repo:app.bsky.feed.post blob:*/*", "--",
                interpreter, GatewaySDKTests.script, "--from-env", "--blob-bytes", "1000",
            ])
            #expect(boxed.status == 0, "\(boxed.stderr)")
            #expect(boxed.json?["did"]?.stringValue == alice.did && boxed.json?["deleted"] == true, "\(boxed.stdout)")
            // A like is outside the policy: the SDK gets 403 PolicyDenied as an XRPC error.
            let like = try await CommandResult.run(Binaries.path("bskyctl"), [
                "--socket", fixture.daemon.socketPath, "exec", "--policy", "read", "--", "/bin/sh", "-c",
                #"curl -s "$ATPROTO_PDS_URL/xrpc/com.atproto.repo.createRecord" -H 'Content-Type: application/json' --data '{"repo":"\#(alice.did)","collection":"app.bsky.feed.like","record":{}}'"#,
            ])
            #expect(like.stdout.contains("\"PolicyDenied\"") && like.stdout.contains("repo:app.bsky.feed.like?action=create"), "\(like.stdout)")
        }
    }

    @Test("bskyctl killed (SIGKILL) while its program runs: the token ends with its connection")
    func killedExec() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            try await fixture.loginAll()
            let tokenFile = fixture.directory.file("token")
            let exec = Process()
            exec.executableURL = URL(fileURLWithPath: Binaries.path("bskyctl"))
            exec.arguments = ["--socket", fixture.daemon.socketPath, "exec", "--", "/bin/sh", "-c",
                              "echo \"$$ $BLUESKYD_GATEWAY_TOKEN\" > \(tokenFile).new && mv \(tokenFile).new \(tokenFile) && exec sleep 120"]
            try exec.run()
            defer { if exec.isRunning { exec.terminate() } }
            #expect(await eventually { FileManager.default.fileExists(atPath: tokenFile) }, "the program started")
            // The program's pid (it stays, orphaned, once bskyctl is killed) and its token.
            let written = try String(contentsOfFile: tokenFile, encoding: .utf8).split(separator: " ")
            let (program, token) = (Int32(written[0]) ?? 0, written[1].trimmingCharacters(in: .whitespacesAndNewlines))
            defer { if program > 0 { kill(program, SIGKILL) } }
            let live = try await GatewayTests.curl(fixture.daemon.gatewaySocketPath, "/t/\(token)/xrpc/com.atproto.server.getSession")
            #expect(live.status == 200, "\(live.body)")
            kill(exec.processIdentifier, SIGKILL)
            // The daemon learns of the closed connection as the kernel closes it; the program
            // lives on, orphaned, and its token is dead.
            let revoked = await eventually {
                (try? await GatewayTests.curl(fixture.daemon.gatewaySocketPath, "/t/\(token)/xrpc/com.atproto.server.getSession"))?.status == 401
            }
            #expect(kill(program, 0) == 0, "the program still runs")
            // Then it goes too (Foundation counts bskyctl as running while a child it left holds
            // the descriptor it watches).
            kill(program, SIGKILL)
            exec.waitUntilExit()
            #expect(revoked, "the token outlived bskyctl")
        }
    }

    @Test("a write over loopback TCP: the journal names the process holding the client's socket, found in /proc")
    func journalOverTCP() async throws {
        try await EndToEndFixture.with(names: ["alice"], logLevel: "info", daemonArguments: ["--gateway-listen", "127.0.0.1:0"]) { fixture in
            try await fixture.loginAll()
            let alice = fixture.accounts[0]
            let address = try #require(try await fixture.daemon.call("daemon.info")["gatewayListen"]?.stringValue)
            let post = try await CommandResult.run("/usr/bin/curl", [
                "--silent", "--show-error", "-H", "Content-Type: application/json",
                "--data", String(decoding: Self.post(alice.did, "over tcp").encoded(), as: UTF8.self),
                "http://\(address)/xrpc/com.atproto.repo.createRecord",
            ])
            #expect(post.status == 0 && post.stdout.contains("\"uri\""), "\(post.stdout) \(post.stderr)")
            let line = try #require(fixture.daemon.log.split(separator: "\n").first { $0.contains("xrpc write") })
            #expect(line.contains("exe=/usr/bin/curl"), "\(line)")
            #expect(!line.contains("pid=?"), "\(line)")
        }
    }

    @Test("a large upload outside a client's policy is refused and never reaches the PDS; within it, the upload streams through; the main socket is unaffected")
    func streamedUploadUnderPolicy() async throws {
        let sockets = try TemporaryDirectory("blueskyd-clients")
        defer { sockets.remove() }
        let config = """
            [[client]]
            name = "photos"
            gateway_socket = "\(sockets.file("photos-xrpc.sock"))"
            policy = "read blob:image/*"
            """
        try await EndToEndFixture.with(names: ["alice"], daemonConfigFile: { _ in config }) { fixture in
            try await fixture.loginAll()
            let socket = sockets.file("photos-xrpc.sock")
            let file = sockets.file("blob")
            // 5 MB: past the 1 MiB the gateway holds whole, so it would stream.
            try Data((0..<5_000_000).map { UInt8(truncatingIfNeeded: $0) }).write(to: URL(fileURLWithPath: file))
            let uploadsBefore = fixture.testbed.requestCount(nsid: "com.atproto.repo.uploadBlob")
            let video = try await GatewayTests.curl(socket, "/xrpc/com.atproto.repo.uploadBlob", [
                "-H", "Content-Type: video/mp4", "--data-binary", "@\(file)"])
            #expect(video.status == 403 && video.error == "PolicyDenied", "\(video.status) \(video.body)")
            #expect(video.json?["permission"]?.stringValue == "blob:video/mp4")
            #expect(fixture.testbed.requestCount(nsid: "com.atproto.repo.uploadBlob") == uploadsBefore, "nothing reached the PDS")
            let image = try await GatewayTests.curl(socket, "/xrpc/com.atproto.repo.uploadBlob", [
                "-H", "Content-Type: image/png", "--data-binary", "@\(file)"])
            #expect(image.status == 200, "\(image.body)")
            #expect(image.json?["blob"]?["size"]?.intValue == 5_000_000)
            // The main gateway socket, unrestricted, was never affected.
            let main = try await GatewayTests.curl(fixture.daemon.gatewaySocketPath, "/xrpc/com.atproto.repo.uploadBlob", [
                "-H", "Content-Type: video/mp4", "--data-binary", "@\(file)"])
            #expect(main.status == 200, "\(main.body)")
        }
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
