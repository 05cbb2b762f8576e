import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

@Suite("Hosted and confidential OAuth clients with the real binaries: client-metadata, login, refresh, key rotation")
struct OAuthHostedClientTests {
    /// blueskyd.toml for a hosted client published on the testbed's clients host.
    static func hostedConfig(_ testbed: Testbed, document: String, redirect: String, auth: String) -> String {
        """
        oauth_client_id = "\(testbed.oauthClientID(path: document))"
        oauth_redirect_uri = "\(redirect)"
        oauth_client_auth = "\(auth)"
        oauth_client_name = "blueskyd end-to-end"
        """
    }

    @Test("a confidential client: publish, log in by pasting the web redirect, 2-year session, refresh with its key across a restart, rotate")
    func confidentialClient() async throws {
        let documentPath = "/blueskyd/client-metadata.json"
        try await EndToEndFixture.with(names: ["alice"], daemonConfigFile: { testbed in
            Self.hostedConfig(testbed, document: documentPath, redirect: testbed.oauthClientID(path: "/blueskyd/callback"),
                              auth: "private_key_jwt")
        }) { fixture in
            let browser = fixture.browser
            let (alice, testbed) = (fixture.accounts[0], fixture.testbed)
            let clientID = testbed.oauthClientID(path: documentPath)

            // The document to publish: the client's identity and its public key only.
            let printed = try await fixture.bskyctl(["client-metadata"])
            #expect(printed.status == 0, "\(printed.stderr)")
            #expect(printed.stderr.contains("Publish this document at \(clientID)"), "\(printed.stderr)")
            let document = try #require(printed.json, "client-metadata prints JSON: \(printed.stdout)")
            #expect(document["client_id"]?.stringValue == clientID)
            #expect(document["token_endpoint_auth_method"] == "private_key_jwt")
            #expect(document["token_endpoint_auth_signing_alg"] == "ES256")
            #expect(document["dpop_bound_access_tokens"] == true)
            #expect(document["application_type"] == "web")
            let keys = try #require(document["jwks"]?["keys"]?.arrayValue)
            #expect(keys.count == 1)
            let firstKeyID = try #require(keys.first?["kid"]?.stringValue)
            #expect(keys.first?["d"] == nil, "the private part is never printed")
            let jwks = try await fixture.bskyctl(["client-metadata", "--jwks"])
            #expect(jwks.json?["keys"]?.arrayValue?.first?["kid"]?.stringValue == firstKeyID)

            // Before the document is published the server cannot know the client: a clear refusal, nothing stored.
            let unpublished = try await fixture.bskyctl(["login", alice.handle, "--no-browser"], stdin: "\n")
            #expect(unpublished.status != 0)
            #expect(unpublished.stderr.contains("client metadata"), "\(unpublished.stderr)")
            #expect(try await fixture.listedAccounts().isEmpty)
            let refusedClients = testbed.oauthTotals.clientAuthenticationFailures
            #expect(refusedClients == 1, "the server refused the unknown client once")

            testbed.publishOAuthClientMetadata(path: documentPath, document: Array(printed.stdout.utf8))
            // The redirect is a web page: bskyctl asks for the address even with no --no-browser.
            let login = try InteractiveBskyctl(["login", alice.handle], socketPath: fixture.daemon.socketPath,
                                               directory: fixture.directory.path)
            let location = try await browser.approve(try await login.authorizationURL())
            #expect(location.hasPrefix(testbed.oauthClientID(path: "/blueskyd/callback") + "?"), "\(location)")
            #expect(login.stderr.contains("paste the address"), "\(login.stderr)")
            login.paste(location)
            #expect(await login.wait() == 0, "the pasted web redirect completes the login: \(login.stderr)")

            let entry = try #require(try await fixture.listedAccounts()[alice.handle])
            #expect(entry["oauth"]?["clientKind"] == "confidential")
            #expect(entry["oauth"]?["clientID"]?.stringValue == clientID)
            #expect(entry["oauth"]?["clientKeyID"]?.stringValue == firstKeyID, "the session is bound to the key it logged in with")
            let ends = try #require(entry["oauth"]?["sessionEndsAt"]?.stringValue.flatMap { try? Date($0, strategy: .iso8601) })
            #expect(ends.timeIntervalSinceNow > 700 * 86_400, "a confidential session lasts up to 2 years, not 14 days")

            // Refreshes authenticate with the key, also after a restart (the key comes back from the store).
            #expect(try await fixture.bskyctl(["refresh", alice.handle]).status == 0)
            try await fixture.restartDaemon()
            let again = try await fixture.bskyctl(["client-metadata"])
            #expect(again.json?["jwks"]?["keys"]?.arrayValue?.first?["kid"]?.stringValue == firstKeyID, "the same key after a restart")
            #expect(try await fixture.bskyctl(["refresh", alice.handle]).status == 0)
            let call = try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--param", "actor=\(alice.did)"])
            #expect(call.status == 0, "\(call.stderr)")
            var stats = testbed.oauthStats(did: alice.did)
            #expect(stats.refreshes == 2 && stats.refreshTokenReplays == 0)
            #expect(testbed.oauthTotals.clientAuthenticationFailures == refusedClients)

            // Rotation: the new key signs new logins; the session stays bound to its own key, which stays listed.
            let rotated = try await fixture.bskyctl(["client-metadata", "--rotate-key", "--json"])
            #expect(rotated.status == 0, "\(rotated.stderr)")
            let newKeyID = try #require(rotated.json?["addedKeyID"]?.stringValue)
            #expect(newKeyID != firstKeyID)
            #expect(rotated.json?["removedKeyIDs"]?.arrayValue == [], "the old key is still in use")
            let listedKeys = rotated.json?["document"]?["jwks"]?["keys"]?.arrayValue?.compactMap { $0["kid"]?.stringValue }
            #expect(listedKeys == [firstKeyID, newKeyID])
            let republished = try await fixture.bskyctl(["client-metadata"])
            testbed.publishOAuthClientMetadata(path: documentPath, document: Array(republished.stdout.utf8))
            #expect(try await fixture.bskyctl(["refresh", alice.handle]).status == 0)

            // Logout revokes with the session's key; the next rotation drops the keys nobody uses.
            #expect(try await fixture.bskyctl(["logout", alice.handle]).status == 0)
            stats = testbed.oauthStats(did: alice.did)
            #expect(stats.revocations == 1, "the session was revoked")
            #expect(testbed.oauthSessionCount(did: alice.did) == 0)
            let second = try await fixture.bskyctl(["client-metadata", "--rotate-key", "--json"])
            let removed = second.json?["removedKeyIDs"]?.arrayValue?.compactMap(\.stringValue) ?? []
            #expect(Set(removed) == [firstKeyID, newKeyID])
            #expect(testbed.oauthTotals.clientAuthenticationFailures == refusedClients)
        }
    }

    @Test("a hosted public native client: loopback redirect on the configured path, 14-day session; no JWKS")
    func hostedPublicNativeClient() async throws {
        let documentPath = "/blueskyd/native.json"
        try await EndToEndFixture.with(names: ["alice"], daemonConfigFile: { testbed in
            Self.hostedConfig(testbed, document: documentPath, redirect: "http://127.0.0.1/blueskyd-callback", auth: "none")
        }) { fixture in
            let browser = fixture.browser
            let (alice, testbed) = (fixture.accounts[0], fixture.testbed)

            let printed = try await fixture.bskyctl(["client-metadata"])
            let document = try #require(printed.json, "\(printed.stdout) \(printed.stderr)")
            #expect(document["application_type"] == "native")
            #expect(document["token_endpoint_auth_method"] == "none")
            #expect(document["redirect_uris"] == ["http://127.0.0.1/blueskyd-callback"])
            #expect(document["jwks"] == nil)
            let jwks = try await fixture.bskyctl(["client-metadata", "--jwks"])
            #expect(jwks.status == 1 && jwks.stderr.contains("not a confidential client"), "\(jwks.stderr)")
            let rotate = try await fixture.bskyctl(["client-metadata", "--rotate-key"])
            #expect(rotate.status == 1 && rotate.stderr.contains("not configured as a confidential"), "\(rotate.stderr)")
            testbed.publishOAuthClientMetadata(path: documentPath, document: Array(printed.stdout.utf8))

            let reply = try await fixture.oauthLogin(alice.handle, browser: browser)
            let oauth = reply["account"]?["oauth"]
            #expect(oauth?["clientKind"] == "hosted-public")
            #expect(oauth?["clientID"]?.stringValue == testbed.oauthClientID(path: documentPath))
            let ends = try #require(oauth?["sessionEndsAt"]?.stringValue.flatMap { try? Date($0, strategy: .iso8601) })
            #expect(abs(ends.timeIntervalSinceNow - 14 * 86_400) < 600, "a public client's session ends after 14 days")
            #expect(try await fixture.bskyctl(["refresh", alice.handle]).status == 0)
            #expect(testbed.oauthStats(did: alice.did).refreshes == 1)
        }
    }

    @Test("the loopback client has nothing to publish, and bskyctl client-metadata says how to configure one")
    func loopbackClientHasNoDocument() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let printed = try await fixture.bskyctl(["client-metadata"])
            #expect(printed.status == 1)
            #expect(printed.stdout.isEmpty)
            #expect(printed.stderr.contains("loopback development client") && printed.stderr.contains("oauth_client_id"),
                    "\(printed.stderr)")
            let json = try await fixture.bskyctl(["client-metadata", "--json"])
            #expect(json.json?["kind"] == "loopback" && json.json?["document"] == .null)
        }
    }

    @Test("two logins at once share a native client's fixed redirect port; it is free again once both ended")
    func loginsShareAFixedPort() async throws {
        let port = try { () throws -> Int in
            let probe = try BusyPort()
            defer { probe.close() }
            return probe.port
        }()
        let documentPath = "/blueskyd/shared-port.json"
        try await EndToEndFixture.with(names: ["alice", "bob"], daemonConfigFile: { testbed in
            Self.hostedConfig(testbed, document: documentPath, redirect: "http://127.0.0.1:\(port)/cb", auth: "none")
        }) { fixture in
            let printed = try await fixture.bskyctl(["client-metadata"])
            fixture.testbed.publishOAuthClientMetadata(path: documentPath, document: Array(printed.stdout.utf8))
            let (alice, bob) = (fixture.accounts[0], fixture.accounts[1])

            // Both logins wait on the same port; the redirects come back in the other order.
            let first = try await fixture.approvedOAuthLogin(alice.handle, browser: fixture.browser)
            let second = try await fixture.approvedOAuthLogin(bob.handle, browser: fixture.browser)
            #expect(first.location.hasPrefix("http://127.0.0.1:\(port)/cb?") && second.location.hasPrefix("http://127.0.0.1:\(port)/cb?"))
            for (login, location) in [(second.loginID, second.location), (first.loginID, first.location)] {
                let page = try await fixture.browser.deliver(location)
                #expect(page.status == 200, "\(page.text)")
                let reply = try await fixture.daemon.call("accounts.oauth.wait", ["loginID": .string(login), "timeoutSeconds": 10])
                #expect(reply["account"]?["state"] == "active")
            }
            #expect(try await fixture.listedAccounts().count == 2)
            let freed = await eventually(timeout: .seconds(10)) { (try? BusyPort(port: port))?.close() != nil }
            #expect(freed, "blueskyd lets go of the port once no login waits on it")
        }
    }

    @Test("a native client's fixed redirect port that another program holds: a clear error naming the port, nothing pushed")
    func busyRedirectPort() async throws {
        let holder = try BusyPort()
        defer { holder.close() }
        let documentPath = "/blueskyd/fixed-port.json"
        try await EndToEndFixture.with(names: ["alice"], daemonConfigFile: { testbed in
            Self.hostedConfig(testbed, document: documentPath, redirect: "http://127.0.0.1:\(holder.port)/cb", auth: "none")
        }) { fixture in
            let printed = try await fixture.bskyctl(["client-metadata"])
            fixture.testbed.publishOAuthClientMetadata(path: documentPath, document: Array(printed.stdout.utf8))
            let login = try await fixture.bskyctl(["login", fixture.accounts[0].handle])
            #expect(login.status == 1)
            #expect(login.stderr.contains("127.0.0.1:\(holder.port)") && login.stderr.contains("redirect"), "\(login.stderr)")
            #expect(fixture.testbed.oauthTotals.pushedAuthorizationRequests == 0)
            #expect(try await fixture.listedAccounts().isEmpty)
        }
    }
}

/// A TCP port on 127.0.0.1 held by a listening socket, as another program would.
private struct BusyPort {
    let descriptor: Int32
    let port: Int

    /// Holds `port`, or any free port when 0.
    init(port: Int = 0) throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.descriptor = descriptor
        // As servers do: connections still closing on the port do not stop a new listener.
        var on: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(descriptor, generic, length) == 0 && listen(descriptor, 1) == 0
                    && getsockname(descriptor, generic, &length) == 0
            }
        }
        guard bound else {
            _ = Glibc.close(descriptor)
            throw POSIXError(.EADDRINUSE)
        }
        self.port = Int(UInt16(bigEndian: address.sin_port))
    }

    func close() { _ = Glibc.close(descriptor) }
}
