import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

/// The XRPC gateway as programs use it: curl and the Python atproto SDK over its Unix socket,
/// with no token of their own.
@Suite("The XRPC gateway: plain XRPC over HTTP for programs that never hold a token")
struct GatewayTests {
    /// curl's answer: the status, then the body.
    struct CurlAnswer {
        var status: Int
        var body: String
        var headers: String
        var json: JSONValue? { try? JSONValue.parse(Array(body.utf8)) }
        var error: String? { json?["error"]?.stringValue }
    }

    static func curl(_ socket: String, _ path: String, _ options: [String] = []) async throws -> CurlAnswer {
        let run = try await CommandResult.run("/usr/bin/curl", [
            "--silent", "--show-error", "--max-time", "60", "--unix-socket", socket, "--dump-header", "/dev/stderr",
            "--write-out", "\n%{http_code}",
        ] + options + ["http://localhost" + path])
        var lines = run.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        let status = Int(lines.popLast() ?? "") ?? 0
        return CurlAnswer(status: status, body: lines.joined(separator: "\n"), headers: run.stderr)
    }

    @Test("curl: queries and procedures for the default account or the one atproto-account names; errors as XRPC bodies")
    func curlOverTheUnixSocket() async throws {
        try await EndToEndFixture.with { fixture in
            try await fixture.loginAll()
            let (alice, bob, testbed) = (fixture.accounts[0], fixture.accounts[1], fixture.testbed)
            let socket = fixture.daemon.gatewaySocketPath
            let attributes = try FileManager.default.attributesOfItem(atPath: socket)
            #expect((attributes[.posixPermissions] as? Int) == 0o600)

            let profile = try await Self.curl(socket, "/xrpc/app.bsky.actor.getProfile?actor=\(bob.did)")
            #expect(profile.status == 200, "\(profile.body)")
            #expect(profile.json?["did"]?.stringValue == bob.did)
            #expect(profile.headers.lowercased().contains("content-type: application/json"))

            // getSession answers for the account in use: SDK helpers read the DID from it.
            let asDefault = try await Self.curl(socket, "/xrpc/com.atproto.server.getSession")
            #expect(asDefault.json?["did"]?.stringValue == alice.did, "the first account logged in is the default")
            for name in [bob.handle, bob.did] {
                let asBob = try await Self.curl(socket, "/xrpc/com.atproto.server.getSession", ["-H", "atproto-account: \(name)"])
                #expect(asBob.json?["did"]?.stringValue == bob.did, "\(name): \(asBob.body)")
            }

            // A post created and deleted as bob; the client's own Authorization and DPoP are never used.
            let before = testbed.recordCount(did: bob.did, collection: "app.bsky.feed.post")
            let record = #"{"repo":"\#(bob.did)","collection":"app.bsky.feed.post","record":{"$type":"app.bsky.feed.post","text":"via curl","createdAt":"2026-11-26T00:00:00Z"}}"#
            let created = try await Self.curl(socket, "/xrpc/com.atproto.repo.createRecord", [
                "-H", "atproto-account: \(bob.handle)", "-H", "Content-Type: application/json",
                "-H", "Authorization: Bearer not-a-token", "-H", "DPoP: not-a-proof", "--data", record,
            ])
            #expect(created.status == 200, "\(created.body)")
            #expect(testbed.recordCount(did: bob.did, collection: "app.bsky.feed.post") == before + 1)
            let uri = try #require(created.json?["uri"]?.stringValue)
            let rkey = String(uri.split(separator: "/").last ?? "")
            let deleted = try await Self.curl(socket, "/xrpc/com.atproto.repo.deleteRecord", [
                "-H", "atproto-account: \(bob.did)", "-H", "Content-Type: application/json",
                "--data", #"{"repo":"\#(bob.did)","collection":"app.bsky.feed.post","rkey":"\#(rkey)"}"#,
            ])
            #expect(deleted.status == 200, "\(deleted.body)")
            #expect(testbed.recordCount(did: bob.did, collection: "app.bsky.feed.post") == before)

            // The PDS's refusals pass through as it wrote them; blueskyd's own are named as over JSON-RPC.
            let missing = try await Self.curl(socket, "/xrpc/com.atproto.repo.getRecord?repo=\(bob.did)&collection=app.bsky.feed.post&rkey=\(rkey)",
                                              ["-H", "atproto-account: \(bob.did)"])
            #expect(missing.status == 400 && missing.error == "RecordNotFound", "\(missing.status) \(missing.body)")
            let unknown = try await Self.curl(socket, "/xrpc/com.atproto.server.getSession", ["-H", "atproto-account: carol.test"])
            #expect(unknown.status == 400 && unknown.error == "AccountNotFound", "\(unknown.body)")
            let notXRPC = try await Self.curl(socket, "/admin")
            #expect(notXRPC.status == 404 && notXRPC.error == "NotFound")
            let badNSID = try await Self.curl(socket, "/xrpc/not-an-nsid")
            #expect(badNSID.status == 400 && badNSID.error == "InvalidRequest")
            // An event stream is refused (501), and nothing reaches the PDS.
            let streamsBefore = testbed.requestCount(nsid: "com.atproto.sync.subscribeRepos")
            let stream = try await Self.curl(socket, "/xrpc/com.atproto.sync.subscribeRepos")
            #expect(stream.status == 501 && stream.error == "MethodNotSupported", "\(stream.body)")
            #expect(stream.json?["message"]?.stringValue?.contains("event stream") == true)
            #expect(testbed.requestCount(nsid: "com.atproto.sync.subscribeRepos") == streamsBefore)
            let put = try await Self.curl(socket, "/xrpc/com.atproto.repo.createRecord", ["-X", "PUT"])
            #expect(put.status == 405 && put.error == "MethodNotSupported")
            let health = try await Self.curl(socket, "/xrpc/_health")
            #expect(health.status == 200 && health.json?["version"]?.stringValue != nil)

            let info = try await fixture.daemon.call("daemon.info")
            #expect(info["gatewaySocket"]?.stringValue == socket)
        }
    }

    @Test("a web page's request (Origin, Referer, a foreign Host) is refused before it reaches any account")
    func browsersAreRefused() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            try await fixture.loginAll()
            let (alice, testbed) = (fixture.accounts[0], fixture.testbed)
            let socket = fixture.daemon.gatewaySocketPath
            let record = #"{"repo":"\#(alice.did)","collection":"app.bsky.feed.post","record":{"$type":"app.bsky.feed.post","text":"x","createdAt":"2026-11-26T00:00:00Z"}}"#
            let before = testbed.requestCount(nsid: "com.atproto.repo.createRecord")
            for header in ["Origin: https://evil.example", "Origin: null", "Referer: https://evil.example/page", "Host: evil.example",
                           "Host: localhost.evil.example:80"] {
                let answer = try await Self.curl(socket, "/xrpc/com.atproto.repo.createRecord", [
                    "-H", header, "-H", "Content-Type: application/json", "--data", record,
                ])
                #expect(answer.status == 403 && answer.error == "BrowserRequestRefused", "\(header): \(answer.status) \(answer.body)")
            }
            #expect(testbed.requestCount(nsid: "com.atproto.repo.createRecord") == before, "nothing reached the PDS")
            #expect(fixture.daemon.log.contains("gateway refused a request"))
        }
    }

    @Test("another uid is refused on the gateway's socket; the daemon's own user is served")
    func otherUsersAreRefused() async throws {
        let directory = try TemporaryDirectory("blueskyd-gateway-peercred")
        defer { directory.remove() }
        let daemon = try await DaemonProcess(directory: directory.path, testbed: nil, asUser: (65534, 65534))
        try await withTearDown { await daemon.stop() } run: {
            let socket = daemon.gatewaySocketPath
            // Root may open nobody's 0600 socket: only the peer credentials stop it.
            let refused = try await Self.curl(socket, "/xrpc/com.atproto.server.getSession")
            #expect(refused.status == 403 && refused.error == "PermissionDenied", "\(refused.status) \(refused.body)")
            let own = try await CommandResult.run("/usr/bin/setpriv", [
                "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/curl", "--silent", "--unix-socket", socket,
                "http://localhost/xrpc/com.atproto.server.getSession",
            ])
            #expect(own.stdout.contains("NoDefaultAccount"), "the owner gets past the door (no account yet): \(own.stdout)")
        }
    }

    @Test("loopback TCP: the daemon's user is served (its uid read from the kernel), another uid and a foreign Host are refused")
    func loopbackTCP() async throws {
        try await EndToEndFixture.with(names: ["alice"], daemonArguments: ["--gateway-listen", "127.0.0.1:0"]) { fixture in
            try await fixture.loginAll()
            let alice = fixture.accounts[0]
            let address = try #require(try await fixture.daemon.call("daemon.info")["gatewayListen"]?.stringValue)
            #expect(address.hasPrefix("127.0.0.1:") && !address.hasSuffix(":0"), "the port the kernel gave: \(address)")
            let url = "http://\(address)/xrpc/com.atproto.server.getSession"
            let curl = ["/usr/bin/curl", "--silent", "--max-time", "30"]

            let own = try await CommandResult.run(curl[0], Array(curl.dropFirst()) + [url])
            #expect(own.json?["did"]?.stringValue == alice.did, "\(own.stdout) \(own.stderr)")
            let other = try await CommandResult.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups"] + curl + [url])
            #expect(other.json?["error"]?.stringValue == "PermissionDenied", "another uid on this machine: \(other.stdout)")
            #expect(!other.stdout.contains(alice.did))
            for host in ["evil.example", "127.0.0.1:1"] {
                let rebound = try await CommandResult.run(curl[0], Array(curl.dropFirst()) + ["-H", "Host: \(host)", url])
                #expect(rebound.json?["error"]?.stringValue == "BrowserRequestRefused", "\(host): \(rebound.stdout)")
            }

            // The token file for clients the socket table cannot show: 0600 beside the socket,
            // a live token; one nobody issued is refused. Another uid cannot read the file, and
            // a token never overrides a uid the table does show.
            let tokenFile = (fixture.daemon.socketPath as NSString).deletingLastPathComponent + "/gateway.token"
            #expect((try FileManager.default.attributesOfItem(atPath: tokenFile)[.posixPermissions] as? Int) == 0o600)
            let token = try String(contentsOfFile: tokenFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(token.hasPrefix("bskyd-gw-"))
            let withToken = try await CommandResult.run(curl[0], Array(curl.dropFirst()) + ["-H", "Authorization: Bearer \(token)", url])
            #expect(withToken.json?["did"]?.stringValue == alice.did, "\(withToken.stdout)")
            let forged = try await CommandResult.run(curl[0], Array(curl.dropFirst()) + ["-H", "Authorization: Bearer bskyd-gw-forged", url])
            #expect(forged.json?["error"]?.stringValue == "GatewayTokenInvalid", "\(forged.stdout)")
            let otherWithToken = try await CommandResult.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups"]
                + curl + ["-H", "Authorization: Bearer \(token)", url])
            #expect(otherWithToken.json?["error"]?.stringValue == "PermissionDenied", "\(otherWithToken.stdout)")
        }
    }
}

