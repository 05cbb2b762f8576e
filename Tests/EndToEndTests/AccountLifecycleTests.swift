import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

@Suite("Accounts end to end: bskyctl, socat and the real daemon against the testbed")
struct AccountLifecycleTests {
    @Test("two app-password accounts: login, list, proxy, pipe through socat, restart, remove")
    func twoAccountsLifecycle() async throws {
        try await EndToEndFixture.with { fixture in
            let (alice, bob) = (fixture.accounts[0], fixture.accounts[1])
            try await fixture.loginAll()

            // The table for people, the JSON for scripts.
            let table = try await fixture.bskyctl(["accounts"])
            #expect(table.status == 0)
            #expect(table.stdout.contains(alice.handle) && table.stdout.contains(bob.handle))
            let listed = try await fixture.listedAccounts()
            #expect(listed[alice.handle]?["did"]?.stringValue == alice.did)
            #expect(listed[alice.handle]?["isDefault"] == true, "the first account becomes the default")
            #expect(listed[bob.handle]?["isDefault"] == false)
            #expect(listed[alice.handle]?["handleVerified"] == true, "alice's handle is confirmed by DNS TXT")
            #expect(listed[bob.handle]?["handleVerified"] == true, "bob's handle is confirmed by HTTPS well-known")
            #expect(listed[bob.handle]?["pds"]?.stringValue == fixture.testbed.pdsURL)

            // getTimeline and createRecord for each account, through bskyctl.
            for account in [alice, bob] {
                let timeline = try await fixture.bskyctl(["proxy", "app.bsky.feed.getTimeline", "--param", "limit=5",
                                                          "--account", account.handle])
                #expect(timeline.status == 0, "getTimeline for \(account.handle): \(timeline.stderr)")
                #expect(timeline.json?["feed"]?.arrayValue != nil, "a timeline has a feed array: \(timeline.stdout)")
                let post: JSONValue = ["repo": .string(account.did), "collection": "app.bsky.feed.post",
                                       "record": ["$type": "app.bsky.feed.post", "text": "hello from blueskyd",
                                                  "createdAt": "2026-11-22T12:00:00Z"]]
                let created = try await fixture.bskyctl(["proxy", "com.atproto.repo.createRecord", "--input", "-",
                                                         "--account", account.did],
                                                        stdin: String(decoding: post.encoded(), as: UTF8.self))
                #expect(created.status == 0, "createRecord for \(account.handle): \(created.stderr)")
                #expect(created.json?["uri"]?.stringValue?.hasPrefix("at://\(account.did)/app.bsky.feed.post/") == true)
                #expect(fixture.testbed.recordCount(did: account.did, collection: "app.bsky.feed.post") == 1,
                        "the PDS holds the new post")
            }

            // A photo-sized upload (Bluesky's image limit is 1,000,000 bytes) travels in one line.
            let photo = fixture.directory.file("photo.jpg")
            let bytes = (0..<1_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            FileManager.default.createFile(atPath: photo, contents: Data(bytes))
            let uploaded = try await fixture.bskyctl(["proxy", "com.atproto.repo.uploadBlob", "--input", photo,
                                                      "--content-type", "image/jpeg", "--account", alice.handle])
            #expect(uploaded.status == 0, "uploadBlob of 1,000,000 bytes: \(uploaded.stderr)")
            #expect(uploaded.json?["blob"]?["size"]?.intValue == 1_000_000, "the PDS got every byte: \(uploaded.stdout)")

            // A shell script piping JSON to the socket.
            let request = #"{"jsonrpc":"2.0","id":7,"method":"xrpc.call","params":{"nsid":"app.bsky.actor.getProfile","params":{"actor":"\#(bob.did)"},"account":"\#(bob.handle)"}}"#
            let piped = try await CommandResult.run("/usr/bin/socat", ["-t", "30", "-", "UNIX-CONNECT:\(fixture.daemon.socketPath)"],
                                                    stdin: request + "\n")
            #expect(piped.status == 0, "socat: \(piped.stderr)")
            let reply = try JSONValue.parse(Array(piped.stdout.utf8))
            #expect(reply["id"] == 7)
            #expect(reply["result"]?["status"] == 200)
            #expect(reply["result"]?["body"]?["did"]?.stringValue == bob.did)
            #expect(reply["result"]?["headers"]?["ratelimit-limit"] != nil, "rate-limit headers are passed on")

            // A restart keeps every account working.
            try await fixture.restartDaemon()
            for account in [alice, bob] {
                let profile = try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--param", "actor=\(account.did)",
                                                         "--account", account.handle])
                #expect(profile.status == 0, "after restart, \(account.handle): \(profile.stderr)")
            }

            // Removing bob ends his server session and leaves alice alone.
            let logout = try await fixture.bskyctl(["logout", bob.handle])
            #expect(logout.status == 0, "logout: \(logout.stderr)")
            #expect(fixture.testbed.stats(did: bob.did).sessionsDeleted == 1, "the PDS saw bob's session end")
            let remaining = try await fixture.listedAccounts()
            #expect(Set(remaining.keys) == [alice.handle])
            let gone = try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--param", "actor=x", "--account", bob.handle])
            #expect(gone.status == 1 && gone.stderr.contains(bob.handle), "a removed account is an unknown account: \(gone.stderr)")

            // No token or password in plain text anywhere we wrote.
            try assertNoSecretsLeaked(fixture)
        }
    }

    func assertNoSecretsLeaked(_ fixture: EndToEndFixture) throws {
        let files = try FileManager.default.subpathsOfDirectory(atPath: fixture.daemon.stateDirectory)
            .map { fixture.daemon.stateDirectory + "/" + $0 } + [fixture.daemon.logFile]
        for file in files {
            guard let data = FileManager.default.contents(atPath: file) else { continue }
            let text = String(decoding: data, as: UTF8.self)
            #expect(!text.contains("eyJ"), "\(file) holds something that looks like a JWT")
            #expect(!text.contains(fixture.accounts[0].appPassword), "\(file) holds the app password")
        }
    }
}
