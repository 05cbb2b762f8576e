import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

/// OAuth scopes: a session granted less than `transition:generic` is refused by its PDS for
/// what it lacks; blueskyd names the scope, says so in an event, and a login upgrade adds it.
@Suite("Scopes: ScopeMissing, account.needsScope, and login --upgrade adding a scope")
struct ScopeTests {
    @Test("a call beyond the granted scope: the testbed refuses, blueskyd names the scope (JSON-RPC and gateway) and publishes account.needsScope; no policy widens it; an upgrade adds it and keeps the UUID")
    func missingScope() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let (alice, testbed) = (fixture.accounts[0], fixture.testbed)
            let granted = "atproto repo:app.bsky.feed.post?action=create"
            let login = try await fixture.oauthLogin(alice.handle, browser: fixture.browser, extra: ["scope": .string(granted)])
            let id = try #require(login["account"]?["id"]?.stringValue)
            #expect(login["account"]?["oauth"]?["scope"]?.stringValue == granted, "accounts show the granted scope")
            let events = try EventListener(socketPath: fixture.daemon.socketPath)
            defer { events.close() }

            // Within the scope: a post.
            let post: JSONValue = ["repo": .string(alice.did), "collection": "app.bsky.feed.post",
                                   "record": ["$type": "app.bsky.feed.post", "text": "scoped", "createdAt": "2026-11-27T00:00:00Z"]]
            let created = try await fixture.daemon.call("xrpc.call", ["nsid": "com.atproto.repo.createRecord", "input": post])
            #expect(created["status"]?.intValue == 200, "\(created)")
            let rkey = String(try #require(created["body"]?["uri"]?.stringValue).split(separator: "/").last ?? "")

            // Beyond it: deleting. The PDS refuses; blueskyd says which scope is missing.
            let refusalsBefore = testbed.oauthStats(did: alice.did).scopeRefusals
            let delete: JSONValue = ["nsid": "com.atproto.repo.deleteRecord", "input": [
                "repo": .string(alice.did), "collection": "app.bsky.feed.post", "rkey": .string(rkey)]]
            let refused = await fixture.rpcErrorValue { _ = try await fixture.daemon.call("xrpc.call", delete) }
            #expect(refused?.name == "ScopeMissing", "\(String(describing: refused))")
            #expect(refused?.data["scope"]?.stringValue == "repo:app.bsky.feed.post?action=delete")
            #expect(refused?.data["account"]?.stringValue == id)
            #expect(testbed.oauthStats(did: alice.did).scopeRefusals == refusalsBefore + 1, "the testbed refused it")
            let event = try await events.waitFor("account.needsScope", did: alice.did)
            #expect(event["scope"]?.stringValue == "repo:app.bsky.feed.post?action=delete")
            // The same refusal again: the error again, but no second event (a program retrying
            // must not flood subscribers). The refresh's event, published after, closes the window.
            let again = await fixture.rpcErrorValue { _ = try await fixture.daemon.call("xrpc.call", delete) }
            #expect(again?.name == "ScopeMissing")
            _ = try await fixture.daemon.call("accounts.refresh", ["account": .string(alice.did), "force": true])
            try await events.waitFor("account.refreshed", did: alice.did)
            #expect(events.kinds(of: alice.did).filter { $0 == "account.needsScope" }.count == 1, "\(events.kinds(of: alice.did))")

            // An upload past the gateway's whole-body limit, streamed to the PDS: the same name
            // and event, not the PDS's raw refusal.
            let image = fixture.directory.file("image.png")
            try Data((0..<2_000_000).map { UInt8(truncatingIfNeeded: $0) }).write(to: URL(fileURLWithPath: image))
            let upload = try await GatewayTests.curl(fixture.daemon.gatewaySocketPath, "/xrpc/com.atproto.repo.uploadBlob", [
                "-H", "Content-Type: image/png", "--data-binary", "@\(image)"])
            #expect(upload.status == 403 && upload.error == "ScopeMissing", "\(upload.status) \(upload.body)")
            #expect(upload.json?["scope"]?.stringValue == "blob:image/png")
            let blobEvent = try await events.waitFor("account.needsScope", did: alice.did, where: { $0["scope"]?.stringValue == "blob:image/png" })
            #expect(blobEvent["nsid"]?.stringValue == "com.atproto.repo.uploadBlob")

            // A gateway token whose policy allows every delete does not widen the grant.
            let script = """
                curl -s -w '\\n%{http_code}\\n' --unix-socket "$BLUESKYD_XRPC_SOCKET" -H 'Content-Type: application/json' \
                  --data '{"repo":"\(alice.did)","collection":"app.bsky.feed.post","rkey":"\(rkey)"}' \
                  "$ATPROTO_PDS_URL/xrpc/com.atproto.repo.deleteRecord"
                """
            let widened = try await CommandResult.run(Binaries.path("bskyctl"), [
                "--socket", fixture.daemon.socketPath, "exec", "--policy", "repo:*", "--", "/bin/sh", "-c", script])
            #expect(widened.stdout.hasSuffix("403\n") && widened.stdout.contains("\"ScopeMissing\""), "\(widened.stdout)")
            #expect(testbed.recordCount(did: alice.did, collection: "app.bsky.feed.post") >= 1)

            // The upgrade: the session's scope plus the one missing, same account.
            let upgraded = try await fixture.oauthLogin(alice.handle, browser: fixture.browser, extra: [
                "account": .string(alice.handle), "scope": "+repo:app.bsky.feed.post?action=delete"])
            #expect(upgraded["account"]?["id"]?.stringValue == id)
            #expect(upgraded["account"]?["oauth"]?["scope"]?.stringValue == granted + " repo:app.bsky.feed.post?action=delete")
            let deleted = try await fixture.daemon.call("xrpc.call", delete)
            #expect(deleted["status"]?.intValue == 200, "\(deleted)")
            #expect(try await fixture.listedAccounts().count == 1)
        }
    }
}

extension EndToEndFixture {
    /// The RPC error `body` throws, or nil.
    func rpcErrorValue(_ body: () async throws -> Void) async -> RPCError? {
        do {
            try await body()
            return nil
        } catch {
            return error as? RPCError
        }
    }
}
