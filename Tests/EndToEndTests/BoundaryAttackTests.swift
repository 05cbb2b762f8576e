import ATTestbed
import BlueskyTesting
import DaemonHarness
import Foundation
import JSONRPC
import Testing

/// The probes of docs/SECURITY.md, each as an attacker would try it against the real daemon and
/// a testbed that misbehaves as the reference servers do: its PDS routes NSIDs whatever their
/// case (Express), its Mastodon instance honours `_method` (Rails). Each asserts what reached
/// the server, not only what the client was told.
@Suite("Boundaries under attack: one canonical request, exec's own socket and sandbox, TCP admission")
struct BoundaryAttackTests {
    static func clients(_ sockets: TemporaryDirectory) -> String {
        """
        [[client]]
        name = "reader"
        socket = "\(sockets.file("reader.sock"))"
        gateway_socket = "\(sockets.file("reader-xrpc.sock"))"
        policy = "read"

        [[client]]
        name = "any-rpc"
        gateway_socket = "\(sockets.file("rpc-xrpc.sock"))"
        policy = "rpc:*"

        [[client]]
        name = "video"
        gateway_socket = "\(sockets.file("video-xrpc.sock"))"
        policy = "rpc:com.atproto.repo.uploadBlob?aud=did:web:video.bsky.app"

        [[client]]
        name = "poster"
        gateway_socket = "\(sockets.file("poster-xrpc.sock"))"
        policy = "repo:app.bsky.feed.post?action=create http:POST:/api/v1/statuses*"
        """
    }

    static let serviceAuth = "com.atproto.server.getServiceAuth"

    @Test("letter case, repeated parameters, unknown write types and getSession's email: each refused or sent exactly as checked")
    func canonicalXRPC() async throws {
        let sockets = try TemporaryDirectory("blueskyd-attack")
        defer { sockets.remove() }
        try await EndToEndFixture.with(names: ["alice"], daemonConfigFile: { _ in Self.clients(sockets) }) { fixture in
            try await fixture.loginAll()
            let (alice, testbed) = (fixture.accounts[0], fixture.testbed)
            let reader = sockets.file("reader-xrpc.sock"), anyRPC = sockets.file("rpc-xrpc.sock")
            let video = sockets.file("video-xrpc.sock"), poster = sockets.file("poster-xrpc.sock")

            // A read-only client asks for a service token under another spelling.
            for spelling in ["Com.atproto.server.getServiceAuth", "com.atproto.server.GETSERVICEAUTH", "COM.ATPROTO.SERVER.getServiceAuth"] {
                let minted = try await GatewayTests.curl(reader, "/xrpc/\(spelling)?aud=did:web:video.bsky.app")
                #expect(minted.status == 403 && minted.error == "PolicyDenied", "\(spelling): \(minted.status) \(minted.body)")
            }
            let rpcSpelling = try await ClientPolicyTests.call(sockets.file("reader.sock"), "xrpc.call", [
                "nsid": "Com.Atproto.Server.GetServiceAuth", "params": ["aud": "did:web:video.bsky.app"]])
            #expect(rpcSpelling.failure?.name == "PolicyDenied", "\(rpcSpelling)")
            // A method of a known namespace that no Lexicon names, in any case, is not sent.
            let unknown = try await GatewayTests.curl(reader, "/xrpc/com.atproto.server.getServiceAuthorization?aud=did:web:x")
            #expect(unknown.status == 501, "\(unknown.body)")
            #expect(testbed.requestCount(nsid: Self.serviceAuth) == 0, "no service token was asked for")

            // rpc:* grants calls, not record writes, whatever the spelling.
            let before = testbed.recordCount(did: alice.did, collection: "app.bsky.feed.post")
            let created = try await GatewayTests.curl(anyRPC, "/xrpc/COM.atproto.repo.createRecord", [
                "-H", "Content-Type: application/json",
                "--data", String(decoding: ClientPolicyTests.post(alice.did, "case").encoded(), as: UTF8.self)])
            #expect(created.status == 403 && created.json?["permission"]?.stringValue == "repo:app.bsky.feed.post?action=create",
                    "\(created.body)")
            #expect(testbed.recordCount(did: alice.did, collection: "app.bsky.feed.post") == before)

            // A repeated aud read as "no audience" would pass any rpc:M?aud=X grant.
            let twice = try await GatewayTests.curl(video,
                "/xrpc/\(Self.serviceAuth)?aud=did:web:evil.example&aud=did:web:video.bsky.app&lxm=com.atproto.repo.uploadBlob")
            #expect(twice.status == 400 && twice.body.contains("aud is given more than once"), "\(twice.body)")
            #expect(testbed.requestCount(nsid: Self.serviceAuth) == 0)
            // Once, as granted: sent.
            let once = try await GatewayTests.curl(video, "/xrpc/\(Self.serviceAuth)?aud=did:web:video.bsky.app&lxm=com.atproto.repo.uploadBlob")
            #expect(once.status == 200 && once.json?["token"]?.stringValue?.hasPrefix("svc.") == true, "\(once.body)")
            #expect(testbed.requestCount(nsid: Self.serviceAuth) == 1)

            // applyWrites with a type the PDS does not take as create needs every action.
            for type in ["com.atproto.repo.applyWrites#Delete", "#remove", "app.bsky.feed.post#create"] {
                let writes: JSONValue = ["repo": .string(alice.did), "writes": [[
                    "$type": .string(type), "collection": "app.bsky.feed.post", "rkey": "3kabc", "value": ["text": "x"]]]]
                let applied = try await GatewayTests.curl(poster, "/xrpc/com.atproto.repo.applyWrites", [
                    "-H", "Content-Type: application/json", "--data", String(decoding: writes.encoded(), as: UTF8.self)])
                #expect(applied.status == 403 && applied.json?["permission"]?.stringValue == "repo:app.bsky.feed.post?action=update",
                        "\(type): \(applied.body)")
            }
            #expect(testbed.requestCount(nsid: "com.atproto.repo.applyWrites") == 0)

            // getSession: the account's email only for a client granted account:email.
            let restricted = try await GatewayTests.curl(reader, "/xrpc/com.atproto.server.getSession")
            #expect(restricted.status == 200 && restricted.json?["did"]?.stringValue == alice.did, "\(restricted.body)")
            #expect(restricted.json?["email"] == nil && restricted.json?["emailConfirmed"] == nil, "\(restricted.body)")
            let viaRPC = try await ClientPolicyTests.call(sockets.file("reader.sock"), "xrpc.call", ["nsid": "com.atproto.server.getSession"]).get()
            #expect(viaRPC["status"]?.intValue == 200 && viaRPC["body"]?["email"] == nil, "\(viaRPC)")
            let owner = try await GatewayTests.curl(fixture.daemon.gatewaySocketPath, "/xrpc/COM.ATPROTO.SERVER.GETSESSION")
            #expect(owner.status == 200 && owner.json?["email"]?.stringValue?.isEmpty == false, "the daemon's user, unrestricted: \(owner.body)")
        }
    }

    @Test("a client granted POST on statuses cannot delete one: _method in the query, a form key, a JSON escape or a chunked body; TRACE is no method")
    func methodOverrides() async throws {
        let sockets = try TemporaryDirectory("blueskyd-attack")
        defer { sockets.remove() }
        try await EndToEndFixture.with(names: ["alice"], daemonConfigFile: { _ in Self.clients(sockets) }) { fixture in
            let testbed = fixture.testbed
            testbed.addMastodonUser(username: "mallory", displayName: "M")
            _ = try await OAuth2AccountTests.login(fixture, testbed.mastodonURL)
            let host = try #require(URL(string: testbed.mastodonURL)?.host)
            let poster = sockets.file("poster-xrpc.sock")
            let base = "/http/mallory@\(host)/api/v1/statuses"
            let posted = try await GatewayTests.curl(poster, base, ["--data", "status=first"])
            #expect(posted.status == 200, "within the grant: \(posted.body)")
            let probes: [(String, [String], String)] = [
                ("query", ["--data", "x=1"], base + "/1?_method=DELETE"),
                ("escaped form key", ["--data", "%5Fmethod=delete"], base + "/1"),
                ("escaped name letters", ["--data", "_%6Dethod=delete"], base + "/1"),
                ("JSON escape", ["-H", "Content-Type: application/json", "--data", #"{"\u005fmethod":"delete"}"#], base + "/1"),
                ("chunked body", ["-H", "Transfer-Encoding: chunked", "--data-binary", "_method=delete"], base + "/1"),
            ]
            for (name, options, path) in probes {
                let answer = try await GatewayTests.curl(poster, path, options)
                #expect(answer.status == 403 && answer.error == "PolicyDenied", "\(name): \(answer.status) \(answer.body)")
            }
            let trace = try await GatewayTests.curl(poster, base, ["-X", "TRACE"])
            #expect(trace.status == 400 && trace.body.contains("method must be one of"), "\(trace.body)")
            #expect(testbed.mastodonStats.requests["deleteStatus"] == nil, "no delete reached the instance")
            #expect(testbed.mastodonStats.requests["postStatus"] == 1)
            // The probe is real: unrestricted, the instance takes the same request as a DELETE.
            let owner = try await GatewayTests.curl(fixture.daemon.gatewaySocketPath, base + "/1?_method=DELETE", ["--data", "x=1"])
            #expect(owner.status == 200, "\(owner.body)")
            #expect(testbed.mastodonStats.requests["deleteStatus"] == 1)
        }
    }

    @Test("""
        bskyctl exec: an unknown option is a usage error; the program gets a socket of its own where its policy holds \
        without the token; with --sandbox it sees no main or client socket, token file, store key, home, /tmp socket \
        (a tmux server's) or network, and cannot unmount its way out
        """)
    func execBoundary() async throws {
        let outside = try TemporaryDirectory("blueskyd-outside")
        defer { outside.remove() }
        // What a user's session leaves around: a tmux server's socket in /tmp (a plain file
        // stands for it: seeing it is the hole), a [[client]] socket outside the main sockets'.
        FileManager.default.createFile(atPath: outside.file("tmux-default"), contents: Data())
        let clientConfig = """
            [[client]]
            name = "poster"
            gateway_socket = "\(outside.file("poster-xrpc.sock"))"
            policy = "repo:app.bsky.feed.post?action=create"
            """
        try await EndToEndFixture.with(names: ["alice"], daemonArguments: ["--gateway-listen", "127.0.0.1:0"],
                                       daemonConfigFile: { _ in clientConfig }) { fixture in
            try await fixture.loginAll()
            let (alice, testbed) = (fixture.accounts[0], fixture.testbed)
            func exec(_ arguments: [String]) async throws -> CommandResult {
                try await CommandResult.run(Binaries.path("bskyctl"), ["--socket", fixture.daemon.socketPath, "exec"] + arguments)
            }
            let misspelt = try await exec(["--sandboxed", "--policy", "read", "--", "true"])
            #expect(misspelt.status == 64 && misspelt.stderr.contains("unknown option '--sandboxed'"), "\(misspelt.stderr)")

            let socketDirectory = (fixture.daemon.socketPath as NSString).deletingLastPathComponent
            let tokenFile = socketDirectory + "/gateway.token"
            #expect(FileManager.default.fileExists(atPath: tokenFile))
            let address = try #require(try await fixture.daemon.call("daemon.info")["gatewayListen"]?.stringValue)
            let record = String(decoding: ClientPolicyTests.post(alice.did, "escape").encoded(), as: UTF8.self)
            // What a hostile program tries: the main sockets, the token file, the key, TCP, and its
            // own socket without its token.
            let script = """
                echo "socket=$BLUESKYD_XRPC_SOCKET"
                [ -e '\(fixture.daemon.gatewaySocketPath)' ] && echo main-gateway-visible
                [ -e '\(fixture.daemon.socketPath)' ] && echo main-socket-visible
                [ -r '\(tokenFile)' ] && echo token-file-readable
                [ -r '\(fixture.daemon.stateDirectory)/store.key' ] && echo store-key-readable
                [ -e '\(outside.file("tmux-default"))' ] && echo tmp-socket-visible
                [ -e '\(outside.file("poster-xrpc.sock"))' ] && echo client-socket-visible
                touch "$HOME/.blueskyd-sandbox-probe" 2>/dev/null && echo home-writable
                umount -l '\(socketDirectory)' 2>/dev/null; umount -l /tmp 2>/dev/null
                [ -e '\(fixture.daemon.gatewaySocketPath)' ] && echo main-gateway-visible-after-umount
                curl -s -o /dev/null -w 'tcp=%{http_code}\\n' --max-time 5 http://\(address)/xrpc/com.atproto.server.getSession
                curl -s -o /dev/null -w 'own-read=%{http_code}\\n' --unix-socket "$BLUESKYD_XRPC_SOCKET" \
                  http://localhost/xrpc/com.atproto.server.getSession
                curl -s -o /dev/null -w 'own-write=%{http_code}\\n' --unix-socket "$BLUESKYD_XRPC_SOCKET" \
                  -H 'Content-Type: application/json' --data '\(record)' http://localhost/xrpc/com.atproto.repo.createRecord
                case "$ATPROTO_PDS_URL" in http://127.0.0.1:9583/*)
                  curl -s -o /dev/null -w 'bridge-read=%{http_code}\\n' "$ATPROTO_PDS_URL/xrpc/com.atproto.server.getSession"
                  curl -s -o /dev/null -w 'bridge-write=%{http_code}\\n' -H 'Content-Type: application/json' --data '\(record)' \
                    "$ATPROTO_PDS_URL/xrpc/com.atproto.repo.createRecord";;
                esac
                true
                """
            let before = testbed.recordCount(did: alice.did, collection: "app.bsky.feed.post")
            let plain = try await exec(["--policy", "read", "--", "/bin/sh", "-c", script])
            #expect(plain.status == 0, "\(plain.stderr)")
            let ownSocket = try #require(plain.stdout.split(separator: "\n").first { $0.hasPrefix("socket=") }?.dropFirst("socket=".count))
            #expect(String(ownSocket) != fixture.daemon.gatewaySocketPath && !ownSocket.hasPrefix(socketDirectory + "/"), "\(ownSocket)")
            #expect(plain.stdout.contains("own-read=200") && plain.stdout.contains("own-write=403"), "\(plain.stdout)")
            #expect(!FileManager.default.fileExists(atPath: String(ownSocket)), "the program's socket is gone once it exited")

            let boxed = try await exec(["--sandbox", "--policy", "read", "--", "/bin/sh", "-c", script])
            #expect(boxed.status == 0, "\(boxed.stderr)")
            try? FileManager.default.removeItem(atPath: NSHomeDirectory() + "/.blueskyd-sandbox-probe")
            #expect(plain.stdout.contains("client-socket-visible"), "without --sandbox the program sees what the user sees")
            for leak in ["main-gateway-visible", "main-socket-visible", "token-file-readable", "store-key-readable", "tmp-socket-visible",
                         "client-socket-visible", "home-writable", "main-gateway-visible-after-umount"] {
                #expect(!boxed.stdout.contains(leak), "\(leak): \(boxed.stdout)")
            }
            #expect(boxed.stdout.contains("tcp=000"), "no network: \(boxed.stdout)")
            #expect(boxed.stdout.contains("bridge-read=200") && boxed.stdout.contains("bridge-write=403"),
                    "the sandbox's own loopback carries the gateway's URL to its socket, under its policy: \(boxed.stdout)")
            #expect(boxed.stdout.contains("own-read=200") && boxed.stdout.contains("own-write=403"), "\(boxed.stdout)")
            #expect(testbed.recordCount(did: alice.did, collection: "app.bsky.feed.post") == before, "nothing was written")
        }
    }

    @Test("over TCP, another user's writes whose connections close at once (their sockets then held by no process, shown as uid 0) are refused, not taken for root's")
    func orphanedConnectionsOfAnotherUser() async throws {
        try #require(getuid() == 0, "the daemon must run as root for an orphaned socket's uid 0 to look like its user's")
        try await EndToEndFixture.with(names: ["alice"], daemonArguments: ["--gateway-listen", "127.0.0.1:0"]) { fixture in
            try await fixture.loginAll()
            let alice = fixture.accounts[0]
            let address = try #require(try await fixture.daemon.call("daemon.info")["gatewayListen"]?.stringValue)
            let port = try #require(address.split(separator: ":").last.map(String.init))
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("orphaned_write.py").path
            let run = try await CommandResult.run("/usr/bin/setpriv", [
                "--reuid=65534", "--regid=65534", "--clear-groups", "--", "/usr/bin/python3", script, port, alice.did, "60"])
            #expect(run.status == 0, "\(run.stderr)")
            // Each request ends refused (counted) or made (a record): waited for until all 60 have.
            let posts = { fixture.testbed.recordCount(did: alice.did, collection: "app.bsky.feed.post") }
            var refused = 0.0
            let settled = await eventually(timeout: .seconds(60)) {
                let scraped = (try? await MetricsTests.scrape(fixture)) ?? [:]
                refused = (scraped["blueskyd_gateway_refusals_total{reason=unknown-peer}"] ?? 0)
                    + (scraped["blueskyd_gateway_refusals_total{reason=other-user}"] ?? 0)
                return Int(refused) + posts() >= 60
            }
            #expect(settled, "every request was refused or made (\(refused) refused, \(posts()) made)")
            #expect(posts() == 0, "no write of another user was made (\(refused) refused)")
        }
    }

    @Test("over TCP, Host: blueskyd (a name a search domain or rebinding can give a web page) is refused")
    func singleLabelHostOverTCP() async throws {
        try await EndToEndFixture.with(names: ["alice"], daemonArguments: ["--gateway-listen", "127.0.0.1:0"]) { fixture in
            try await fixture.loginAll()
            let address = try #require(try await fixture.daemon.call("daemon.info")["gatewayListen"]?.stringValue)
            let run = try await CommandResult.run("/usr/bin/curl", [
                "--silent", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Host: blueskyd",
                "http://\(address)/xrpc/com.atproto.server.getSession"])
            #expect(run.stdout == "403", "\(run.stdout) \(run.stderr)")
            let unix = try await GatewayTests.curl(fixture.daemon.gatewaySocketPath, "/xrpc/com.atproto.server.getSession", ["-H", "Host: blueskyd"])
            #expect(unix.status == 200, "on the Unix socket it still names the gateway: \(unix.body)")
        }
    }
}

@Suite("Rows changed without the key: no start seals them; store reseal shows them and refuses what was sealed before")
struct SealedRowAttackTests {
    @Test("SQLite: the seal migration's record deleted, its column dropped and the PDS changed: the restart seals nothing, the account needs a login, reseal refuses it (and refuses to run beside the daemon)")
    func sqliteRowRewritten() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            try await fixture.loginAll()
            let alice = fixture.accounts[0]
            let state = fixture.daemon.stateDirectory
            func reseal(_ arguments: [String]) async throws -> CommandResult {
                try await CommandResult.run(Binaries.path("blueskyd"), ["store", "reseal", "--state-directory", state] + arguments)
            }
            let busy = try await reseal(["--dry-run"])
            #expect(busy.status == 75 && busy.stderr.contains("stop it first"), "\(busy.stderr)")
            _ = await fixture.daemon.stop()
            let clean = try await reseal([])
            #expect(clean.status == 0 && clean.stdout.contains("Every account's seal holds"), "\(clean.stdout) \(clean.stderr)")

            let database = state + "/accounts.sqlite"
            let attack = try await CommandResult.run("/usr/bin/sqlite3", [database, """
                ALTER TABLE account DROP COLUMN metadata_seal;
                DELETE FROM grdb_migrations WHERE identifier = 'v7-metadata-seal';
                UPDATE account SET pds = 'https://pds.attacker.test' WHERE did = '\(alice.did)';
                """])
            #expect(attack.status == 0, "\(attack.stderr)")
            let listed = try await reseal(["--dry-run", "--json"])
            #expect(listed.status == 0, "\(listed.stderr)")
            let report = try #require(try? JSONValue.parse(Array(listed.stdout.utf8)), "\(listed.stdout)")
            let row = try #require(report["accounts"]?.arrayValue?.first)
            #expect(row["finding"] == "seal-removed" && row["pds"] == "https://pds.attacker.test", "\(report)")
            let id = try #require(row["id"]?.stringValue)
            let named = try await reseal(["--account", id])
            #expect(named.status == 64 && named.stderr.contains("cannot be sealed"), "\(named.stderr)")

            try await fixture.restartDaemon()
            let accounts = try await fixture.listedAccounts()
            let view = try #require(accounts.values.first { $0["did"]?.stringValue == alice.did })
            #expect(view["state"] == "needs-login", "\(view)")
            do {
                _ = try await fixture.daemon.call("xrpc.call", ["nsid": "app.bsky.actor.getProfile", "account": .string(alice.did),
                                                                "params": ["actor": .string(alice.did)]])
                Issue.record("a rewritten row made a call")
            } catch let error as RPCError {
                #expect(error.name == "NeedsLogin", "\(error)")
            }
            #expect(fixture.daemon.log.contains("record-altered"), "the start says so in the journal")
        }
    }
}
