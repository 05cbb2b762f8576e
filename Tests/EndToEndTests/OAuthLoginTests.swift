import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

@Suite("OAuth login with the real binaries: by handle, DID and PDS URL, pasted redirects, refusals")
struct OAuthLoginTests {
    @Test("bskyctl login by handle (browser redirect) and by DID (pasted redirect); calls are DPoP-bound")
    func loginByHandleAndDID() async throws {
        try await EndToEndFixture.with { fixture in
            let browser = fixture.browser
            let (alice, bob) = (fixture.accounts[0], fixture.accounts[1])
            let testbed = fixture.testbed

            // By handle: bskyctl prints the URL (no desktop), the browser delivers the redirect.
            let login = try InteractiveBskyctl(["login", alice.handle], socketPath: fixture.daemon.socketPath,
                                               directory: fixture.directory.path)
            let location = try await browser.approve(try await login.authorizationURL())
            #expect(location.hasPrefix("http://127.0.0.1:"))
            let page = try await browser.deliver(location)
            #expect(page.status == 200 && page.text.contains("close this tab"), "\(page.text)")
            #expect(await login.wait() == 0, "bskyctl login succeeds: \(login.stderr)")
            #expect(login.stdout.contains("Logged in as \(alice.handle) (\(alice.did))"), "\(login.stdout)")

            // By DID, pasting the redirect (--no-browser).
            let pasted = try InteractiveBskyctl(["login", bob.did, "--no-browser"], socketPath: fixture.daemon.socketPath,
                                                directory: fixture.directory.path)
            let bobLocation = try await browser.approve(try await pasted.authorizationURL())
            pasted.paste(bobLocation)
            #expect(await pasted.wait() == 0, "the pasted redirect completes the login: \(pasted.stderr)")
            #expect(pasted.stdout.contains(bob.did))

            let listed = try await fixture.listedAccounts()
            for account in [alice, bob] {
                let entry = try #require(listed[account.handle])
                #expect(entry["auth"] == "oauth")
                #expect(entry["oauth"]?["clientKind"] == "loopback")
                #expect(entry["oauth"]?["issuer"]?.stringValue == testbed.oauthIssuer)
                #expect(entry["oauth"]?["scope"]?.stringValue?.contains("atproto") == true)
                #expect(entry["oauth"]?["sessionEndsAt"]?.stringValue != nil, "a public client's session has an end")
            }
            #expect(listed[alice.handle]?["isDefault"] == true, "the first account is the default")
            let table = try await fixture.bskyctl(["accounts"])
            #expect(table.stdout.contains("oauth session ends in 13d 23h") || table.stdout.contains("oauth session ends in 14d"),
                    "bskyctl accounts shows when the public session ends: \(table.stdout)")
            #expect(try await fixture.daemon.call("daemon.status")["oauthSessionsEndingSoon"] == 0)

            // Calls go out DPoP-bound, with the key of the login.
            for account in [alice, bob] {
                let before = testbed.oauthStats(did: account.did)
                let call = try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--account", account.handle,
                                                      "--param", "actor=\(account.did)"])
                #expect(call.status == 0, "\(call.stderr)")
                let after = testbed.oauthStats(did: account.did)
                #expect(after.authenticatedResourceCalls > before.authenticatedResourceCalls)
                #expect(after.totalDPoPRejections == 0, "\(after.dpopRejections)")
            }
            #expect(testbed.stats(did: alice.did).sessionsCreated == 0, "no app-password session was ever made")
        }
    }

    @Test("login by PDS URL; Ctrl-C in bskyctl cancels the login in the daemon")
    func loginByURLAndCancel() async throws {
        try await EndToEndFixture.with(names: ["alice", "carol"]) { fixture in
            let browser = fixture.browser
            let carol = fixture.accounts[1]
            fixture.testbed.setOAuthApprovalAccount(did: carol.did)
            let reply = try await fixture.oauthLogin(fixture.testbed.pdsURL, browser: browser)
            #expect(reply["account"]?["did"]?.stringValue == carol.did)
            #expect(reply["account"]?["auth"] == "oauth")

            let login = try InteractiveBskyctl(["login", fixture.accounts[0].handle], socketPath: fixture.daemon.socketPath,
                                               directory: fixture.directory.path)
            let url = try await login.authorizationURL()
            login.interrupt()
            let status = await login.wait()
            #expect(status == 130, "Ctrl-C ends bskyctl (\(String(describing: status))): \(login.stderr)")
            // The cancelled login no longer accepts its redirect: its listener is closed.
            let location = try await browser.approve(url)
            let delivered = try? await browser.deliver(location)
            #expect(delivered == nil, "the listener is gone: \(delivered?.text ?? "")")
            #expect(try await fixture.listedAccounts().count == 1, "nothing stored for the cancelled login")
        }
    }

    @Test("a wrong iss, a wrong sub and a rogue issuer are each refused with their own error, storing nothing")
    func misbehavioursRefused() async throws {
        try await EndToEndFixture.with { fixture in
            let browser = fixture.browser
            let alice = fixture.accounts[0]
            let testbed = fixture.testbed

            testbed.setOAuthMisbehaviour(.wrongIssuerInRedirect, enabled: true)
            var login = try await fixture.approvedOAuthLogin(alice.handle, browser: browser)
            var name = await fixture.rpcErrorName {
                try await fixture.daemon.call("accounts.oauth.complete", ["loginID": .string(login.loginID),
                                                                          "redirectURL": .string(login.location)])
            }
            #expect(name == "OAuthIssuerMismatch")
            testbed.resetOAuth()

            testbed.setOAuthMisbehaviour(.wrongSubjectInTokens, enabled: true)
            login = try await fixture.approvedOAuthLogin(alice.handle, browser: browser)
            let page = try await browser.deliver(login.location)
            #expect(page.status == 400 && page.text.contains("not \(alice.did)"), "\(page.text)")
            name = await fixture.rpcErrorName {
                try await fixture.daemon.call("accounts.oauth.wait", ["loginID": .string(login.loginID), "timeoutSeconds": 10])
            }
            #expect(name == "OAuthSubjectMismatch")
            testbed.resetOAuth()

            // An issuer no DID names: its login works, but the binding check refuses its tokens.
            login = try await fixture.approvedOAuthLogin(testbed.rogueOAuthIssuer, browser: browser)
            name = await fixture.rpcErrorName {
                try await fixture.daemon.call("accounts.oauth.complete", ["loginID": .string(login.loginID),
                                                                          "redirectURL": .string(login.location)])
            }
            #expect(name == "OAuthIssuerNotAuthoritative")

            // The same redirect again: its state was used.
            name = await fixture.rpcErrorName {
                try await fixture.daemon.call("accounts.oauth.complete", ["loginID": .string(login.loginID),
                                                                          "redirectURL": .string(login.location)])
            }
            #expect(name == "OAuthStateReused")
            let unknown = try await browser.deliver(login.location.replacingOccurrences(of: "state=", with: "state=x"))
            #expect(unknown.status == 400)

            // Plain http is refused before anything is sent (allow_insecure_loopback is off, and
            // this is no loopback host anyway).
            name = await fixture.rpcErrorName {
                try await fixture.daemon.call("accounts.oauth.begin", ["identifier": .string(testbed.pdsURL.replacingOccurrences(of: "https://", with: "http://"))])
            }
            #expect(name == "OAuthMetadataInvalid")
            name = await fixture.rpcErrorName {
                try await fixture.daemon.call("accounts.oauth.wait", ["loginID": "no-such-login", "timeoutSeconds": 1])
            }
            #expect(name == "OAuthLoginNotFound")

            let listed = try await fixture.daemon.call("accounts.list")
            #expect(listed["accounts"]?.arrayValue?.isEmpty == true, "nothing was stored")
            #expect(testbed.oauthTotals.tokenExchanges == 1, "the rogue login got as far as its tokens")
        }
    }
}
