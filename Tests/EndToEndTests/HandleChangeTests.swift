import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

@Suite("A handle changed on the server")
struct HandleChangeTests {
    @Test("after a refresh the account answers to its new handle, also after a restart, and no longer to the old one")
    func followsTheNewHandle() async throws {
        let fixture = try await EndToEndFixture(names: ["erin"])
        defer { Task { await fixture.tearDown() } }
        try await fixture.loginAll()
        let account = fixture.accounts[0]
        let newHandle = "erin-renamed.\(account.handle.split(separator: ".", maxSplits: 1)[1])"
        fixture.testbed.setHandle(did: account.did, handle: newHandle)

        let refresh = try await fixture.bskyctl(["refresh", account.handle])
        #expect(refresh.status == 0, "\(refresh.stderr)")
        for round in ["before restart", "after restart"] {
            let listed = try await fixture.listedAccounts()
            #expect(listed[newHandle]?["did"]?.stringValue == account.did, "\(round): listed under the new handle")
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
