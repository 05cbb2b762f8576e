import Crypto
import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

/// Accounts at OAuth 2.0 servers that are not atproto ones, with the real binaries: the
/// testbed's Mastodon-compatible instance (app registration, rotating refresh tokens) and its
/// plain OAuth 2.0 server (RFC 7591, JWT access tokens, no refresh token on request).
@Suite("OAuth 2.0 accounts end to end: login, upkeep, calls, policies, logout")
struct OAuth2AccountTests {
    /// `bskyctl login <identifier>` with the browser delivering the redirect; the account.
    static func login(_ fixture: EndToEndFixture, _ identifier: String, extra: [String] = []) async throws -> JSONValue {
        let login = try InteractiveBskyctl(["login", identifier, "--json"] + extra, socketPath: fixture.daemon.socketPath,
                                           directory: fixture.directory.path)
        let location = try await fixture.browser.approve(try await login.authorizationURL())
        #expect(location.hasPrefix("http://127.0.0.1:"), "\(location)")
        let page = try await fixture.browser.deliver(location)
        #expect(page.status == 200, "\(page.text)")
        try #require(await login.wait() == 0, "bskyctl login \(identifier): \(login.stderr)")
        return try #require(try? JSONValue.parse(Array(login.stdout.utf8)))["account"] ?? .null
    }

    @Test("a Mastodon instance by URL: registered once, profile cached, calls by http.call and /http/, idle rotations without a replay, logout revokes")
    func mastodon() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let testbed = fixture.testbed
            testbed.addMastodonUser(username: "carol", displayName: "Carol C")
            let account = try await Self.login(fixture, testbed.mastodonURL)
            let host = try #require(URL(string: testbed.mastodonURL)?.host)
            #expect(account["auth"] == "oauth2")
            #expect(account["handle"]?.stringValue == "carol@\(host)")
            #expect(account["did"]?.stringValue == testbed.mastodonURL + "#100001", "issuer#subject names the account")
            #expect(account["pds"]?.stringValue == testbed.mastodonURL, "calls go to the instance's origin")
            #expect(account["oauth"]?["clientKind"] == "oauth2")
            #expect(account["oauth"]?["scope"] == "read write")
            #expect(account["oauth"]?["sessionEndsAt"] == .null, "a refresh token keeps the session: no known end")
            #expect(account["profile"]?["displayName"] == "Carol C")
            #expect(testbed.mastodonStats.appsRegistered == 1)
            let table = try await fixture.bskyctl(["accounts"])
            #expect(table.stdout.contains("carol@\(host)") && table.stdout.contains("oauth2"), "\(table.stdout)")

            // http.call: the bearer token added by blueskyd, the instance's answer passed back.
            let me = try await fixture.daemon.call("http.call", ["account": .string("carol@\(host)"), "method": "GET",
                                                                 "path": "/api/v1/accounts/verify_credentials"])
            #expect(me["status"] == 200 && me["body"]?["username"] == "carol", "\(me)")
            // The gateway: a write, form-encoded, as a program posts to Mastodon.
            let posted = try await GatewayTests.curl(fixture.daemon.gatewaySocketPath, "/http/carol@\(host)/api/v1/statuses",
                                                     ["--data", "status=hello+from+blueskyd"])
            #expect(posted.status == 200, "\(posted.body)")
            #expect(testbed.mastodonStatuses.map(\.text) == ["hello from blueskyd"])
            // Only the account's own server: a path is a path, never a URL or a way out of it.
            for path in ["https://evil.test/x", "//evil.test/x", "/api/../oauth/token", "/api/%2e%2e/x"] {
                let refused = await fixture.rpcErrorName {
                    _ = try await fixture.daemon.call("http.call", ["account": .string("carol@\(host)"), "path": .string(path)])
                }
                #expect(refused == "InvalidParams", "\(path): \(String(describing: refused))")
            }
            // An atproto call for this account is refused, and the other way round.
            let wrongKind = await fixture.rpcErrorName {
                _ = try await fixture.daemon.call("xrpc.call", ["account": .string("carol@\(host)"), "nsid": "com.atproto.server.getSession"])
            }
            #expect(wrongKind == "InvalidParams")

            // Idle upkeep: tokens of 6 s are refreshed ahead of their expiry, each refresh
            // token spent once.
            testbed.setMastodonAccessTokenLifetime(.seconds(6))
            _ = try await fixture.daemon.call("accounts.refresh", ["account": .string("carol@\(host)")])
            let rotated = await eventually(timeout: .seconds(40)) { testbed.mastodonStats.grants.refreshes >= 4 }
            #expect(rotated, "refreshed on schedule: \(testbed.mastodonStats.grants)")
            #expect(testbed.mastodonStats.grants.refreshTokenReplays == 0)
            let scraped = try await MetricsTests.scrape(fixture)
            #expect((scraped["blueskyd_refreshes_total{kind=oauth2,outcome=rotated}"] ?? 0) >= 4, "refreshes counted by kind")
            #expect((scraped["blueskyd_proxied_calls_total{front=jsonrpc,status=2xx}"] ?? 0) >= 1, "http.call counted")
            let again = try await fixture.daemon.call("http.call", ["account": .string("carol@\(host)"), "path": "/api/v1/accounts/verify_credentials"])
            #expect(again["status"] == 200, "the newest token works: \(again)")

            // An upload past the gateway's whole-body limit is passed on as it arrives.
            let media = fixture.directory.file("media.bin")
            var generator = SystemRandomNumberGenerator()
            let bytes = (0..<3_000_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
            try Data(bytes).write(to: URL(fileURLWithPath: media))
            let uploaded = try await GatewayTests.curl(fixture.daemon.gatewaySocketPath, "/http/carol@\(host)/api/v2/media",
                                                       ["-H", "Content-Type: application/octet-stream", "--data-binary", "@" + media])
            let digest = SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
            #expect(uploaded.status == 200 && uploaded.body.contains(digest), "3 MB arrived intact: \(uploaded.body.prefix(300))")

            // A second login to the instance reuses the registration.
            _ = try await Self.login(fixture, testbed.mastodonURL)
            #expect(testbed.mastodonStats.appsRegistered == 1, "one registration per server")

            // Logout revokes the grant at the instance, then forgets the account.
            let logout = try await fixture.bskyctl(["logout", "carol@\(host)"])
            #expect(logout.status == 0, "\(logout.stderr)")
            #expect(testbed.mastodonLiveGrants == 0, "the instance no longer honours any token of the session")
            #expect(testbed.mastodonStats.grants.revocations >= 1)
            #expect(try await fixture.listedAccounts()["carol@\(host)"] == nil)
        }
    }

    @Test("a [[provider]] whose server issues no refresh token: sessionEndingSoon before the access token expires, then needs-login with the reason")
    func accessOnlyProvider() async throws {
        try await EndToEndFixture.with(names: ["alice"], daemonConfigFile: { testbed in
            """
            [[provider]]
            name = "sso"
            issuer = "\(testbed.genericOAuthURL)"
            scope = "profile"
            """
        }) { fixture in
            let testbed = fixture.testbed
            testbed.addGenericOAuthUser(subject: "u-7", username: "dora", name: "Dora D")
            testbed.configureGenericOAuth(accessTokenLifetime: .seconds(8), issuesRefreshTokens: false)
            let events = try EventListener(socketPath: fixture.daemon.socketPath)
            defer { events.close() }
            let account = try await Self.login(fixture, "sso")
            #expect(account["oauth"]?["clientKind"] == "oauth2-access-only")
            #expect(account["oauth"]?["sessionEndsAt"]?.stringValue == account["accessExpiresAt"]?.stringValue)
            #expect(account["did"]?.stringValue == testbed.genericOAuthURL + "#u-7")
            #expect(account["profile"]?["displayName"] == "Dora D")
            let did = try #require(account["did"]?.stringValue)
            try await events.waitFor("account.sessionEndingSoon", did: did, timeout: .seconds(15))
            let ended = try await events.waitFor("account.needsLogin", did: did, timeout: .seconds(20))
            #expect(ended["reason"]?.stringValue?.contains("no refresh token") == true, "\(ended)")
            #expect(testbed.genericOAuthStats.refreshes == 0, "nothing was ever sent as a refresh")
            let call = await fixture.rpcErrorName {
                _ = try await fixture.daemon.call("http.call", ["account": .string(did), "path": "/userinfo"])
            }
            #expect(call == "NeedsLogin")
            let table = try await fixture.bskyctl(["accounts"])
            #expect(table.stdout.contains("run: bskyctl login \(testbed.genericOAuthURL)"), "how to sign in again: \(table.stdout)")
        }
    }

    @Test("300 concurrent calls meeting an expired token (the server's clock ahead) make exactly one refresh; each call is answered; the profile is fetched again")
    func concurrentCallsOneRefresh() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let testbed = fixture.testbed
            testbed.addMastodonUser(username: "erin", displayName: "Erin")
            let account = try await Self.login(fixture, testbed.mastodonURL)
            let id = try #require(account["id"]?.stringValue)
            let refreshesBefore = testbed.mastodonStats.grants.refreshes
            // The instance's clock runs past the token's two hours; blueskyd's does not, so it
            // learns of the expiry only from the 401s of the calls in flight.
            testbed.advanceClock(by: .seconds(7_260))
            testbed.renameMastodonUser("erin", displayName: "Erin E")
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<300 {
                    group.addTask {
                        let answer = try await fixture.daemon.call("http.call", ["account": .string(id), "path": "/api/v1/accounts/verify_credentials"])
                        return answer["status"]?.intValue ?? -1
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.count == 300 && statuses.allSatisfy { $0 == 200 }, "\(Dictionary(grouping: statuses, by: { $0 }).mapValues(\.count))")
            let refreshes = testbed.mastodonStats.grants.refreshes - refreshesBefore
            #expect(refreshes == 1, "single flight: \(refreshes) refreshes")
            #expect(testbed.mastodonStats.grants.refreshTokenReplays == 0)
            // A refused token puts the cached profile in doubt: it is fetched again.
            let renamed = try await eventually(timeout: .seconds(10)) {
                try await fixture.listedAccounts()["erin@\(try #require(URL(string: testbed.mastodonURL)?.host))"]?["profile"]?["displayName"] == "Erin E"
            }
            #expect(renamed, "the profile was fetched again after the 401")
        }
    }

    @Test("policies name methods and paths: a reader's gateway socket reads but cannot post; bskyctl exec posts within http:POST:/api/v1/statuses; a pasted redirect logs in; bskyctl http")
    func policiesExecAndPaste() async throws {
        let sockets = try TemporaryDirectory("blueskyd-http-clients")
        defer { sockets.remove() }
        try await EndToEndFixture.with(names: ["alice"], logLevel: "info", daemonConfigFile: { _ in
            """
            [[client]]
            name = "reader"
            socket = "\(sockets.file("reader.sock"))"
            gateway_socket = "\(sockets.file("reader-xrpc.sock"))"
            policy = "http:GET:/api/*"
            """
        }) { fixture in
            let testbed = fixture.testbed
            testbed.addMastodonUser(username: "ivy", displayName: "Ivy")
            let host = try #require(URL(string: testbed.mastodonURL)?.host)
            // --no-browser: the redirect the browser was sent to is pasted.
            let login = try InteractiveBskyctl(["login", testbed.mastodonURL, "--no-browser"], socketPath: fixture.daemon.socketPath,
                                               directory: fixture.directory.path)
            login.paste(try await fixture.browser.approve(try await login.authorizationURL()))
            #expect(await login.wait() == 0, "\(login.stderr)")
            #expect(login.stdout.contains("Logged in as ivy@\(host)"), "\(login.stdout)")

            let read = try await GatewayTests.curl(sockets.file("reader-xrpc.sock"), "/http/ivy@\(host)/api/v1/accounts/verify_credentials")
            #expect(read.status == 200, "\(read.body)")
            let write = try await GatewayTests.curl(sockets.file("reader-xrpc.sock"), "/http/ivy@\(host)/api/v1/statuses",
                                                    ["--data", "status=nope"])
            #expect(write.status == 403 && write.error == "PolicyDenied" && write.body.contains("http:POST:/api/v1/statuses"), "\(write.body)")
            let rpcWrite = try await ClientPolicyTests.call(sockets.file("reader.sock"), "http.call",
                                                            ["path": "/api/v1/statuses", "method": "POST", "body": ["status": "nope"]])
            if case .failure(let error) = rpcWrite { #expect(error.name == "PolicyDenied") } else { Issue.record("the reader posted") }
            #expect(testbed.mastodonStatuses.isEmpty, "nothing refused reached the instance")

            // bskyctl exec: the program gets a gateway token held to its policy, never the bearer token.
            let script = """
                curl -s -o /dev/null -w '%{http_code}\\n' --unix-socket "$BLUESKYD_XRPC_SOCKET" --data 'status=from+exec' \
                  "http://localhost/t/$BLUESKYD_GATEWAY_TOKEN/http/ivy@\(host)/api/v1/statuses"
                curl -s -o /dev/null -w '%{http_code}\\n' --unix-socket "$BLUESKYD_XRPC_SOCKET" \
                  "http://localhost/t/$BLUESKYD_GATEWAY_TOKEN/http/ivy@\(host)/api/v1/accounts/verify_credentials"
                """
            let exec = try await CommandResult.run(Binaries.path("bskyctl"), [
                "--socket", fixture.daemon.socketPath, "exec", "--account", "ivy@\(host)", "--policy", "http:POST:/api/v1/statuses",
                "--", "/bin/sh", "-c", script,
            ])
            #expect(exec.status == 0, "\(exec.stderr)")
            #expect(exec.stdout.split(separator: "\n") == ["200", "403"], "the post within the policy, the read outside it: \(exec.stdout)")
            #expect(testbed.mastodonStatuses.map(\.text) == ["from exec"])

            // Counted with the proxied calls of each front (the refused POST was never made).
            let scraped = try await MetricsTests.scrape(fixture)
            #expect((scraped["blueskyd_proxied_calls_total{front=gateway,status=2xx}"] ?? 0) >= 1, "\(scraped)")

            // bskyctl http: the body printed, an error status an exit status.
            let me = try await fixture.bskyctl(["http", "GET", "/api/v1/accounts/verify_credentials", "--account", "ivy@\(host)"])
            #expect(me.status == 0 && me.json?["username"] == "ivy", "\(me.stdout) \(me.stderr)")
            let missing = try await fixture.bskyctl(["http", "GET", "/api/v1/nothing", "--account", "ivy@\(host)"])
            #expect(missing.status == 1 && missing.stderr.contains("404"), "\(missing.stderr)")
        }
    }

    @Test("a [[provider]] written out in full, as NeoDB needs (no metadata, Mastodon-style apps): nothing is discovered, the app is registered there")
    func providerWithoutMetadata() async throws {
        try await EndToEndFixture.with(names: ["alice"], daemonConfigFile: { testbed in
            """
            [[provider]]
            name = "instance"
            issuer = "\(testbed.mastodonURL)"
            authorization_endpoint = "\(testbed.mastodonURL)/oauth/authorize"
            token_endpoint = "\(testbed.mastodonURL)/oauth/token"
            revocation_endpoint = "\(testbed.mastodonURL)/oauth/revoke"
            app_registration_endpoint = "\(testbed.mastodonURL)/api/v1/apps"
            scope = "read"
            """
        }) { fixture in
            let testbed = fixture.testbed
            testbed.addMastodonUser(username: "kim", displayName: "Kim")
            let account = try await fixture.oauthLogin("instance", browser: fixture.browser)["account"] ?? .null
            #expect(account["auth"] == "oauth2" && account["oauth"]?["scope"] == "read", "\(account)")
            #expect(account["profile"]?["displayName"] == "Kim", "Mastodon's verify_credentials, as app registration says")
            let requests = testbed.mastodonStats.requests
            #expect(requests[MastodonEndpoint.metadata.rawValue] == nil, "no metadata was asked for: \(requests)")
            #expect(requests[MastodonEndpoint.registerApp.rawValue] == 1)
            let id = try #require(account["id"]?.stringValue)
            _ = try await fixture.daemon.call("accounts.remove", ["account": .string(id)])
            #expect(testbed.mastodonLiveGrants == 0, "revoked at the configured endpoint")
        }
    }

    @Test("Mastodon.py (PyPI), unmodified, under bskyctl exec over loopback TCP: reads and posts with BLUESKYD_HTTP_URL as its base URL, holding no token of the account")
    func mastodonSDKUnderExec() async throws {
        try await EndToEndFixture.with(names: ["alice"], daemonArguments: ["--gateway-listen", "127.0.0.1:0"]) { fixture in
            let testbed = fixture.testbed
            testbed.addMastodonUser(username: "lee", displayName: "Lee L")
            let host = try #require(URL(string: testbed.mastodonURL)?.host)
            _ = try await fixture.oauthLogin(testbed.mastodonURL, browser: fixture.browser)
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("mastodon_sdk_client.py").path
            let run = try await CommandResult.run(Binaries.path("bskyctl"), [
                "--socket", fixture.daemon.socketPath, "exec", "--account", "lee@\(host)",
                "--policy", "http:GET:/api/v1/accounts/verify_credentials http:POST:/api/v1/statuses", "--",
                "python3", script, "posted by Mastodon.py",
            ])
            #expect(run.status == 0, "\(run.stderr)")
            let result = try #require(run.json, "\(run.stdout) \(run.stderr)")
            #expect(result["username"] == "lee" && result["displayName"] == "Lee L")
            #expect(testbed.mastodonStatuses.map(\.text) == ["posted by Mastodon.py"])
        }
    }

    @Test("a Mastodon instance as mastodon.social runs it (no refresh token, tokens that never expire): kept without upkeep, a refresh asked for leaves it be, a token the instance revoked ends it with the reason")
    func mastodonAsRunInProduction() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let testbed = fixture.testbed
            testbed.runMastodonAsInProduction(true)
            testbed.addMastodonUser(username: "max", displayName: "Max")
            let account = try await fixture.oauthLogin(testbed.mastodonURL, browser: fixture.browser)["account"] ?? .null
            let id = try #require(account["id"]?.stringValue)
            #expect(account["oauth"]?["clientKind"] == "oauth2-access-only" && account["accessExpiresAt"] == .null, "\(account)")
            #expect(account["oauth"]?["sessionEndsAt"] == .null && account["nextRefreshAt"] == .null, "nothing to look after")
            let refreshed = try await fixture.bskyctl(["refresh", id])
            #expect(refreshed.status == 0, "a refresh asked for leaves a token that never expires be: \(refreshed.stderr)")
            #expect(try await Self.state(fixture, id) == "active")
            let me = try await fixture.daemon.call("http.call", ["account": .string(id), "path": "/api/v1/accounts/verify_credentials"])
            #expect(me["status"] == 200)
            #expect(testbed.mastodonStats.grants.refreshes == 0)

            // The user removes the app in the instance's settings: the next look ends the account.
            testbed.revokeMastodonGrants()
            _ = try await fixture.bskyctl(["refresh", id])
            let ended = try await fixture.daemon.call("accounts.list")["accounts"]?.arrayValue?.first { $0["id"]?.stringValue == id }
            #expect(ended?["state"] == "needs-login", "\(String(describing: ended))")
            #expect(ended?["stateReason"]?.stringValue?.contains("HTTP 401") == true, "\(String(describing: ended))")
        }
    }

    static func state(_ fixture: EndToEndFixture, _ id: String) async throws -> String? {
        try await fixture.daemon.call("accounts.list")["accounts"]?.arrayValue?.first { $0["id"]?.stringValue == id }?["state"]?.stringValue
    }
}
