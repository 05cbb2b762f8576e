import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

@Suite("Handles: changed on the server, or claimed by someone else")
struct HandleChangeTests {
    @Test("after a refresh the account answers to its new handle, also after a restart, and no longer to the old one")
    func followsTheNewHandle() async throws {
        // erin's handles resolve by HTTPS well-known, which the testbed moves with the handle.
        try await EndToEndFixture.with(names: ["erin"], configure: { $0.publishWellKnown = true }) { fixture in
            try await fixture.loginAll()
            let account = fixture.accounts[0]
            let newHandle = "erin-renamed.\(account.handle.split(separator: ".", maxSplits: 1)[1])"
            fixture.testbed.setHandle(did: account.did, handle: newHandle)

            let refresh = try await fixture.bskyctl(["refresh", account.handle])
            #expect(refresh.status == 0, "\(refresh.stderr)")
            for round in ["before restart", "after restart"] {
                let listed = try await fixture.listedAccounts()
                #expect(listed[newHandle]?["did"]?.stringValue == account.did, "\(round): listed under the new handle")
                #expect(listed[newHandle]?["handleVerified"] == true, "\(round): the new handle passed the two-way check")
                let call = try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--param", "actor=\(account.did)",
                                                      "--account", newHandle])
                #expect(call.status == 0, "\(round): the new handle names the account: \(call.stderr)")
                let old = try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--param", "actor=\(account.did)",
                                                     "--account", account.handle])
                #expect(old.status == 1 && old.stderr.contains(account.handle), "\(round): the old handle is gone: \(old.stderr)")
                if round == "before restart" { try await fixture.restartDaemon() }
            }
        }
    }

    @Test("an OAuth account (whose refreshes report no handle) follows its new handle from its DID document on refresh")
    func oauthAccountFollowsTheNewHandle() async throws {
        try await EndToEndFixture.with(names: ["erin"], configure: { $0.publishWellKnown = true }) { fixture in
            let browser = fixture.browser
            let account = fixture.accounts[0]
            _ = try await fixture.oauthLogin(account.handle, browser: browser)
            let newHandle = "erin-oauth.\(account.handle.split(separator: ".", maxSplits: 1)[1])"
            fixture.testbed.setHandle(did: account.did, handle: newHandle)

            let refresh = try await fixture.bskyctl(["refresh", account.handle])
            #expect(refresh.status == 0, "\(refresh.stderr)")
            let listed = try await fixture.listedAccounts()
            #expect(listed[newHandle]?["did"]?.stringValue == account.did, "listed under the new handle: \(listed.keys)")
            #expect(listed[newHandle]?["handleVerified"] == true)
            let call = try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--param", "actor=\(account.did)",
                                                  "--account", newHandle])
            #expect(call.status == 0, "the new handle names the account: \(call.stderr)")
            let old = try await fixture.bskyctl(["refresh", account.handle])
            #expect(old.status == 1 && old.stderr.contains(account.handle), "the old handle is gone: \(old.stderr)")
        }
    }

    @Test("a handle that now leads to another DID stops naming the account, though its DID document still claims it")
    func handleTakenAway() async throws {
        try await EndToEndFixture.with(names: ["alice", "bob", "carol"]) { fixture in
            let (bob, carol) = (fixture.accounts[1], fixture.accounts[2])
            let login = try await fixture.bskyctl(["login", bob.handle, "--app-password"], stdin: bob.appPassword + "\n")
            try #require(login.status == 0, "\(login.stderr)")
            #expect(try await fixture.listedAccounts()[bob.handle]?["handleVerified"] == true)

            // carol takes the name: bob.<domain>'s well-known now answers carol's DID.
            fixture.testbed.setHandle(did: carol.did, handle: bob.handle)
            let refresh = try await fixture.bskyctl(["refresh", bob.did])
            #expect(refresh.status == 0, "\(refresh.stderr)")
            let entry = try await fixture.daemon.call("accounts.list")["accounts"]?.arrayValue?.first { $0["did"]?.stringValue == bob.did }
            #expect(entry?["handleVerified"] == false, "the two-way check fails now: \(String(describing: entry))")
            let call = try await fixture.bskyctl(["refresh", bob.handle])
            #expect(call.status == 1 && call.stderr.contains(bob.handle), "the handle no longer names bob's account: \(call.stderr)")
        }
    }

    @Test("a DID document that claims another account's handle never captures calls made by that handle")
    func unverifiedClaimIsNotAName() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let alice = fixture.accounts[0]
            var claim = AccountSpec(name: "mallory2")
            claim.documentHandle = alice.handle
            let impostor = await fixture.testbed.createAccount(claim)
            // alice first: the impostor, logged in after her, must not take her handle over.
            for (identifier, password) in [(alice.handle, alice.appPassword), (impostor.did, impostor.appPassword)] {
                let login = try await fixture.bskyctl(["login", identifier, "--app-password"], stdin: password + "\n")
                try #require(login.status == 0, "login \(identifier): \(login.stderr)")
            }
            func sessionDID() async throws -> String? {
                let call = try await fixture.bskyctl(["proxy", "com.atproto.server.getSession", "--account", alice.handle, "--json"])
                return try JSONValue.parse(Array(call.stdout.utf8))["body"]?["did"]?.stringValue
            }
            #expect(try await sessionDID() == alice.did, "the handle names the account that verified it")
            let removed = try await fixture.bskyctl(["logout", impostor.did])
            #expect(removed.status == 0, "\(removed.stderr)")
            #expect(try await sessionDID() == alice.did, "removing the impostor leaves alice's handle in place")
        }
    }
}
