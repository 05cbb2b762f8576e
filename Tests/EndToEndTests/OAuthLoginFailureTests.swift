import ATTestbed
import BlueskyHTTP
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

/// The authorization server failing in the middle of `bskyctl login`: the user is told what
/// broke, nothing is stored, and logging in again once the server is back works.
@Suite("OAuth login against a failing authorization server")
struct OAuthLoginFailureTests {
    @Test("a 503 for the authorization server's metadata fails bskyctl login, naming it; nothing is stored; the next login works")
    func metadataUnavailable() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let browser = fixture.browser
            let testbed = fixture.testbed
            let alice = fixture.accounts[0]
            let before = try await fixture.bskyctl(["accounts", "--json"])

            testbed.injectOAuthFailures(endpoint: .metadata, status: 503, count: 1)
            let login = try await fixture.bskyctl(["login", alice.handle, "--timeout", "20"])
            #expect(login.status == 1, "bskyctl login fails: \(login.stdout)")
            #expect(login.stderr.contains(testbed.oauthIssuer + "/.well-known/oauth-authorization-server") && login.stderr.contains("503"),
                    "the error names the document and its HTTP status: \(login.stderr)")
            #expect(testbed.pendingOAuthFailures(endpoint: .metadata) == 0, "the daemon met the failure")
            #expect(testbed.oauthStats(did: alice.did).pushedAuthorizationRequests == 0, "nothing was pushed")
            try await Self.expectNothingStored(fixture, did: alice.did, accountsBefore: before)

            try await fixture.loginWithBskyctl(alice.handle, browser: browser)
            #expect(try await fixture.listedAccounts()[alice.handle]?["state"] == "active")
        }
    }

    @Test("a 503 at PAR fails bskyctl login, naming the authorization server; nothing is stored; the next login works")
    func pushedAuthorizationUnavailable() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let browser = fixture.browser
            let testbed = fixture.testbed
            let alice = fixture.accounts[0]
            let before = try await fixture.bskyctl(["accounts", "--json"])

            // A burst of two: the first login meets one, a second try the other.
            testbed.injectOAuthFailures(endpoint: .pushedAuthorization, status: 503, count: 2)
            let login = try await fixture.bskyctl(["login", alice.handle, "--timeout", "20"])
            #expect(login.status == 1, "bskyctl login fails: \(login.stdout)")
            #expect(login.stderr.contains("authorization server") && login.stderr.contains("503"),
                    "the error names the server and its HTTP status: \(login.stderr)")
            let attempts = testbed.authorizationServerRequests.filter { $0.endpoint == .pushedAuthorization }
            #expect(attempts.map { $0.status ?? 0 } == [503], "a 503 is not retried within the login: \(attempts.map { $0.status ?? 0 })")
            try await Self.expectNothingStored(fixture, did: alice.did, accountsBefore: before)

            // The second try fails the same way; then the server is back.
            #expect(try await fixture.bskyctl(["login", alice.handle, "--timeout", "20"]).status == 1)
            #expect(testbed.pendingOAuthFailures(endpoint: .pushedAuthorization) == 0)
            try await fixture.loginWithBskyctl(alice.handle, browser: browser)
            #expect(try await fixture.listedAccounts()[alice.handle]?["state"] == "active")
        }
    }

    @Test("a 503 from the authorize page reaches only the browser: the login waits, and reloading the page completes it")
    func authorizePageUnavailable() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let browser = fixture.browser
            let testbed = fixture.testbed
            let alice = fixture.accounts[0]
            let before = try await fixture.bskyctl(["accounts", "--json"])

            testbed.injectOAuthFailures(endpoint: .authorize, status: 503, count: 1)
            let login = try InteractiveBskyctl(["login", alice.handle], socketPath: fixture.daemon.socketPath,
                                               directory: fixture.directory.path)
            let url = try await login.authorizationURL()
            let page = try await browser.http.send(OutboundRequest(url: try #require(URL(string: url))))
            #expect(page.status == 503, "the browser shows the server's error")
            try await Self.expectNothingStored(fixture, did: alice.did, accountsBefore: before)

            // The user reloads the page: the same login, the same pushed request, approved now.
            let reloaded = try await browser.deliver(try await browser.approve(url))
            #expect(reloaded.status == 200, "\(reloaded.text)")
            #expect(await login.wait() == 0, "the waiting bskyctl completes: \(login.stderr)")
            #expect(login.stdout.contains("Logged in as \(alice.handle)"), "\(login.stdout)")
            let stats = testbed.oauthStats(did: alice.did)
            #expect(stats.pushedAuthorizationRequests == 1 && stats.tokenExchanges == 1, "one login, not two")
        }
    }

    @Test("a 503 for the metadata is reported as a server failure to retry, not as metadata breaking the rules")
    func metadataOutageIsTemporary() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            fixture.testbed.injectOAuthFailures(endpoint: .metadata, status: 503, count: 1)
            // A script tells "try again later" (as a 503 at PAR already is) from "this server is
            // misconfigured" (OAuthMetadataInvalid: a document breaking the atproto profile).
            let name = await fixture.rpcErrorName {
                try await fixture.daemon.call("accounts.oauth.begin", ["identifier": .string(fixture.accounts[0].handle)])
            }
            #expect(name == "UpstreamUnavailable")
        }
    }

    @Test("bskyctl's line for a server failure during login neither blames the PDS nor claims an account is kept")
    func loginOutageMessage() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            fixture.testbed.injectOAuthFailures(endpoint: .pushedAuthorization, status: 503, count: 1)
            let login = try await fixture.bskyctl(["login", fixture.accounts[0].handle, "--timeout", "20"])
            #expect(login.status == 1)
            #expect(login.stderr.contains("503"), "\(login.stderr)")
            // The authorization server failed, not the PDS; and a login that failed kept nothing.
            #expect(!login.stderr.contains("(PDS)") && !login.stderr.contains("the account is kept"), "\(login.stderr)")
        }
    }

    /// The account list bskyctl prints is what it was, and the server holds no session.
    @Test("a 503 at the token endpoint after the browser step: OAuthServerUnavailable, nothing stored, the next login works")
    func codeExchangeUnavailable() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let (alice, testbed) = (fixture.accounts[0], fixture.testbed)
            let before = try await fixture.bskyctl(["accounts", "--json"])
            let (loginID, location) = try await fixture.approvedOAuthLogin(alice.handle, browser: fixture.browser)
            testbed.injectOAuthFailures(endpoint: .token, status: 503, count: 1)
            let name = await fixture.rpcErrorName {
                _ = try await fixture.daemon.call("accounts.oauth.complete", ["loginID": .string(loginID), "redirectURL": .string(location)])
            }
            #expect(name == "OAuthServerUnavailable", "an outage, not a refusal: \(String(describing: name))")
            #expect(testbed.pendingOAuthFailures(endpoint: .token) == 0)
            try await Self.expectNothingStored(fixture, did: alice.did, accountsBefore: before)
            try await fixture.loginWithBskyctl(alice.handle, browser: fixture.browser)
            #expect(try await fixture.listedAccounts()[alice.handle]?["state"] == "active")
        }
    }

    static func expectNothingStored(_ fixture: EndToEndFixture, did: String, accountsBefore: CommandResult) async throws {
        let after = try await fixture.bskyctl(["accounts", "--json"])
        #expect(after.status == 0 && after.stdout == accountsBefore.stdout, "nothing stored: \(after.stdout)")
        #expect(fixture.testbed.oauthSessionCount(did: did) == 0, "no session at the server")
    }
}
