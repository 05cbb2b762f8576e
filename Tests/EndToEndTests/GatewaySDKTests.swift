import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

/// The Python atproto SDK from PyPI, unmodified, pointed at the gateway with no login.
@Suite("The Python atproto SDK through the gateway, for app-password and OAuth accounts")
struct GatewaySDKTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("gateway_sdk_client.py").path

    /// Runs the SDK script; its JSON result, or the test stops with its stderr.
    static func sdk(_ arguments: [String]) async throws -> JSONValue {
        let run = try await CommandResult.run("/usr/bin/env", ["python3", script] + arguments)
        try #require(run.status == 0, "the SDK's calls fail (make deps installs the atproto package): \(run.stderr)")
        return try #require(run.json, "\(run.stdout)")
    }

    @Test("session, profile, timeline, a post, a 20 MB image and the post's deletion, for each kind of account; over TCP too")
    func everyCallOfTheSDK() async throws {
        try await EndToEndFixture.with(daemonArguments: ["--gateway-listen", "127.0.0.1:0"],
                                       configureTestbed: { $0.maxRequestBodyBytes = 64 << 20 }) { fixture in
            let (alice, bob, testbed) = (fixture.accounts[0], fixture.accounts[1], fixture.testbed)
            let login = try await fixture.bskyctl(["login", alice.handle, "--app-password"], stdin: alice.appPassword + "\n")
            try #require(login.status == 0, "\(login.stderr)")
            _ = try await fixture.oauthLogin(bob.did, browser: fixture.browser)

            for (account, kind) in [(alice, "app-password"), (bob, "oauth")] {
                let posts = testbed.recordCount(did: account.did, collection: "app.bsky.feed.post")
                let result = try await Self.sdk([
                    "--socket", fixture.daemon.gatewaySocketPath, "--account", account.handle, "--blob-bytes", "20000000",
                ])
                #expect(result["did"]?.stringValue == account.did, "\(kind)")
                #expect(result["handle"]?.stringValue == account.handle, "\(kind)")
                #expect(result["profileDid"]?.stringValue == account.did, "\(kind)")
                #expect(result["postUri"]?.stringValue?.hasPrefix("at://\(account.did)/app.bsky.feed.post/") == true, "\(kind)")
                #expect(result["blobSize"]?.intValue == 20_000_000, "\(kind)")
                #expect(result["blobMimeType"]?.stringValue == "*/*" || result["blobMimeType"]?.stringValue?.hasPrefix("image/") == true,
                        "\(kind): \(result)")
                #expect(result["deleted"] == .bool(true), "\(kind)")
                #expect(testbed.recordCount(did: account.did, collection: "app.bsky.feed.post") == posts, "\(kind): created, then deleted")
            }

            // The same SDK over loopback TCP, for programs that cannot use a Unix socket.
            let address = try #require(try await fixture.daemon.call("daemon.info")["gatewayListen"]?.stringValue)
            let overTCP = try await Self.sdk(["--url", "http://\(address)", "--account", bob.did])
            #expect(overTCP["did"]?.stringValue == bob.did && overTCP["deleted"] == .bool(true), "\(overTCP)")
        }
    }

    @Test("refreshes falling due while the SDK calls are invisible to it")
    func refreshesAreInvisible() async throws {
        try await EndToEndFixture.with(names: ["alice"], accessTokenLifetime: .seconds(3)) { fixture in
            try await fixture.loginAll()
            let (alice, testbed) = (fixture.accounts[0], fixture.testbed)
            let refreshesBefore = testbed.stats(did: alice.did).refreshes
            let result = try await Self.sdk(["--socket", fixture.daemon.gatewaySocketPath, "--loop-seconds", "10"])
            #expect((result["loopCalls"]?.intValue ?? 0) > 10, "\(result)")
            let refreshes = testbed.stats(did: alice.did).refreshes - refreshesBefore
            #expect(refreshes >= 2, "tokens living 3 s were refreshed during 10 s of calls: \(refreshes)")
            #expect(testbed.stats(did: alice.did).refreshTokenReuses == 0)
        }
    }
}
