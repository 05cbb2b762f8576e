import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

/// `events.subscribe` as scripts and `bskyctl events` see it: the right events, in order,
/// never a token, for every kind of account change.
@Suite("Events pushed to subscribers")
struct EventStreamTests {
    @Test("login, refresh, default change and logout, seen by a raw client and by bskyctl events --json, in order")
    func accountLifecycle() async throws {
        try await EndToEndFixture.with(names: ["alice", "bob"]) { fixture in
            let (alice, bob) = (fixture.accounts[0], fixture.accounts[1])
            let raw = try EventListener(socketPath: fixture.daemon.socketPath)
            defer { raw.close() }
            #expect(raw.reply["subscribed"] == true)
            let subscribedAt = try #require(raw.reply["seq"]?.intValue)
            let follower = try InteractiveBskyctl(["events", "--json"], socketPath: fixture.daemon.socketPath,
                                                  directory: fixture.directory.path)
            defer { follower.interrupt() }
            // bskyctl's own subscription is in place once the daemon counts two subscribers.
            #expect(try await eventually { try await fixture.daemon.call("daemon.status")["events"]?["subscribers"]?.intValue == 2 })

            try await fixture.loginAll()
            try await raw.waitFor("account.profileUpdated", did: bob.did)
            try await raw.waitFor("account.profileUpdated", did: alice.did)
            #expect(try await fixture.bskyctl(["refresh", alice.handle]).status == 0)
            try await raw.waitFor("account.refreshed", did: alice.did)
            #expect(try await fixture.bskyctl(["use", bob.handle]).status == 0)
            #expect(try await fixture.bskyctl(["logout", alice.handle]).status == 0)
            try await raw.waitFor("account.removed", did: alice.did)

            let aliceKinds = raw.kinds(of: alice.did).filter { $0 != "account.profileUpdated" }
            #expect(aliceKinds == ["account.added", "account.defaultChanged", "login.completed", "account.refreshed",
                                   "account.removed"], "\(aliceKinds)")
            #expect(raw.kinds(of: bob.did).filter { $0 != "account.profileUpdated" }
                    == ["account.added", "login.completed", "account.defaultChanged"], "\(raw.kinds(of: bob.did))")
            let login = try #require(raw.first("login.completed", did: alice.did))
            #expect(login["method"] == "app-password")
            #expect(login["account"]?["state"] == "active")
            let removed = try #require(raw.first("account.removed", did: alice.did))
            #expect(removed["serverSessionEnded"] == true)

            // Numbered in order, each with a time, never a token.
            let seqs = raw.notifications.compactMap { $0["seq"]?.intValue }
            #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count)
            #expect(seqs.first.map { $0 > subscribedAt } == true)
            #expect(raw.notifications.allSatisfy { $0["at"]?.stringValue != nil })
            for line in raw.lines {
                #expect(!line.contains("eyJ") && !line.contains(alice.appPassword) && !line.contains("accessJwt"), "\(line)")
            }

            // bskyctl events --json printed the same events, one JSON object per line.
            #expect(await eventually {
                follower.stdout.split(separator: "\n").contains { $0.contains("\"account.removed\"") }
            }, "\(follower.stdout)")
            let printed = follower.stdout.split(separator: "\n").compactMap { try? JSONValue.parse(Array($0.utf8)) }
            #expect(printed.compactMap { $0["seq"]?.intValue } == seqs, "\(follower.stdout)")
        }
    }

    @Test("a 429 episode, then needs-login: retrying with the server's wait, recovered, then needs-login with the reason")
    func retryingAndNeedsLogin() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let (alice, testbed) = (fixture.accounts[0], fixture.testbed)
            try await fixture.loginAll()
            let raw = try EventListener(socketPath: fixture.daemon.socketPath, ["accounts": [.string(alice.handle)]])
            defer { raw.close() }
            let nsid = "com.atproto.server.refreshSession"
            testbed.injectFailures(nsid: nsid, status: 429, count: 1, retryAfterSeconds: 120)
            #expect(try await fixture.bskyctl(["refresh", alice.handle]).status == 1)
            let retrying = try await raw.waitFor("account.retrying")
            let retryAt = try #require(retrying["retryAt"]?.stringValue.flatMap { try? Date($0, strategy: .iso8601) })
            #expect(retryAt.timeIntervalSinceNow > 100, "the server's 120 s is in the event")
            #expect(retrying["account"]?["state"] == "retrying")
            #expect(try await fixture.bskyctl(["refresh", alice.handle, "--force"]).status == 0)
            try await raw.waitFor("account.refreshed")

            testbed.revokeSessions(did: alice.did)
            #expect(try await fixture.bskyctl(["refresh", alice.handle, "--force"]).status == 1)
            let needsLogin = try await raw.waitFor("account.needsLogin")
            #expect(needsLogin["reason"]?.stringValue?.isEmpty == false)
            #expect(needsLogin["account"]?["state"] == "needs-login")
            let kinds = raw.kinds().filter { $0 != "account.profileUpdated" }
            #expect(kinds == ["account.retrying", "account.refreshed", "account.needsLogin"], "\(kinds)")
        }
    }

    @Test("a handle change arrives as account.handleChanged, unverified, then verified")
    func handleChange() async throws {
        try await EndToEndFixture.with(names: ["erin"], configure: { $0.publishWellKnown = true }) { fixture in
            let (erin, testbed) = (fixture.accounts[0], fixture.testbed)
            try await fixture.loginAll()
            let raw = try EventListener(socketPath: fixture.daemon.socketPath, ["kinds": ["account.handleChanged"]])
            defer { raw.close() }
            let newHandle = "erin-events.\(erin.handle.split(separator: ".", maxSplits: 1)[1])"
            testbed.setHandle(did: erin.did, handle: newHandle)
            #expect(try await fixture.bskyctl(["refresh", erin.handle]).status == 0)
            let renamed = try await raw.waitFor("account.handleChanged")
            #expect(renamed["oldHandle"]?.stringValue == erin.handle)
            #expect(renamed["handle"]?.stringValue == newHandle)
            #expect(await eventually { raw.notifications.last?["verified"] == true }, "then verified: \(raw.notifications)")
            #expect(raw.notifications.last?["account"]?["handle"]?.stringValue == newHandle)
        }
    }

    @Test("an OAuth account that moved to another PDS arrives as account.moved with both PDSes")
    func move() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let (alice, testbed) = (fixture.accounts[0], fixture.testbed)
            _ = try await fixture.oauthLogin(alice.did, browser: fixture.browser)
            let raw = try EventListener(socketPath: fixture.daemon.socketPath,
                                        ["kinds": ["account.moved", "account.needsLogin"], "accounts": [.string(alice.did)]])
            defer { raw.close() }
            let oldPDS = try #require(try await fixture.listedAccounts()[alice.handle]?["pds"]?.stringValue)
            testbed.movePDS(did: alice.did)
            let call = try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--param", "actor=\(alice.did)"])
            #expect(call.status == 0, "\(call.stderr)")
            let moved = try await raw.waitFor("account.moved")
            #expect(moved["oldPDS"]?.stringValue == oldPDS)
            #expect(moved["newPDS"]?.stringValue == testbed.pdsAliasURL)
            #expect(moved["account"]?["pds"]?.stringValue == testbed.pdsAliasURL)
            #expect(raw.kinds() == ["account.moved"], "followed, not logged out: \(raw.kinds())")
        }
    }

    @Test("a subscriber that does not read: its backlog stays bounded, it gets events.gap, and other clients are served")
    func slowSubscriber() async throws {
        try await EndToEndFixture.with(names: ["alice", "bob"]) { fixture in
            let (alice, bob) = (fixture.accounts[0], fixture.accounts[1])
            try await fixture.loginAll()
            let onlyDefaults: JSONValue = ["kinds": ["account.defaultChanged"]]
            let stalled = try EventListener(socketPath: fixture.daemon.socketPath, onlyDefaults, reading: false)
            defer { stalled.close() }
            let reader = try EventListener(socketPath: fixture.daemon.socketPath, onlyDefaults)
            defer { reader.close() }
            let rssBefore = try residentKiB(fixture.daemon.pid)
            // 4,000 default changes, alternating (3,999 events: alice is the default already).
            let client = try RPCClientConnection(socketPath: fixture.daemon.socketPath, timeout: .seconds(60))
            defer { client.close() }
            for index in 0..<4_000 {
                let target = index % 2 == 0 ? alice.did : bob.did
                _ = try client.call(method: "accounts.setDefault", params: ["account": .string(target)]).get()
            }
            #expect(await eventually { reader.kinds().count >= 3_999 }, "the reading subscriber got every event: \(reader.kinds().count)")
            let status = try await fixture.daemon.call("daemon.status")
            let backlog = try #require(status["events"]?["largestBacklog"]?.intValue)
            #expect(backlog <= 1_024, "the stalled subscriber holds at most its backlog: \(backlog)")
            let rssAfter = try residentKiB(fixture.daemon.pid)
            #expect(rssAfter - rssBefore < 32 * 1024, "RSS \(rssBefore) KiB -> \(rssAfter) KiB")

            stalled.startReading()
            let gap = try await stalled.waitFor("events.gap")
            let missed = try #require(gap["missed"]?.intValue)
            #expect(missed > 1_000, "\(gap)")
            #expect(await eventually { stalled.kinds().filter { $0 == "account.defaultChanged" }.count + missed == 3_999 },
                    "every event was either delivered or counted as missed")
            let seqs = stalled.notifications.compactMap { $0["seq"]?.intValue }
            #expect(seqs == seqs.sorted(), "what it did get is in order")
        }
    }

    @Test("resuming with since replays exactly what was missed; a since the history no longer holds gets events.gap")
    func resumeWithSince() async throws {
        try await EndToEndFixture.with(names: ["alice", "bob"]) { fixture in
            let (alice, bob) = (fixture.accounts[0], fixture.accounts[1])
            try await fixture.loginAll()
            let first = try EventListener(socketPath: fixture.daemon.socketPath)
            // alice, the first account, is the default: bob becomes it.
            #expect(try await fixture.bskyctl(["use", bob.handle]).status == 0)
            let seen = try await first.waitFor("account.defaultChanged")
            first.close()
            let lastSeen = try #require(seen["seq"]?.intValue)

            // Missed while disconnected.
            #expect(try await fixture.bskyctl(["use", alice.handle]).status == 0)
            #expect(try await fixture.bskyctl(["refresh", alice.handle]).status == 0)
            let resumed = try EventListener(socketPath: fixture.daemon.socketPath, ["since": .number(Double(lastSeen))])
            defer { resumed.close() }
            try await resumed.waitFor("account.refreshed", did: alice.did)
            let replayed = resumed.notifications.filter { $0["kind"]?.stringValue != "account.profileUpdated" }
            #expect(replayed.compactMap { $0["kind"]?.stringValue } == ["account.defaultChanged", "account.refreshed"], "\(replayed)")
            #expect(replayed.allSatisfy { $0["account"]?["did"]?.stringValue == alice.did })
            #expect(resumed.notifications.allSatisfy { ($0["seq"]?.intValue ?? 0) > lastSeen })

            // From before this daemon's history (an earlier run's number): a gap, then live events.
            let stale = try EventListener(socketPath: fixture.daemon.socketPath, ["since": 1])
            defer { stale.close() }
            let gap = try await stale.waitFor("events.gap")
            #expect(gap["reason"] == "history")
            #expect(try await fixture.bskyctl(["use", bob.handle]).status == 0)
            try await stale.waitFor("account.defaultChanged")
        }
    }

    @Test("bskyctl events prints readable lines, and when blueskyd stops it says so and exits 69")
    func daemonStop() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let alice = fixture.accounts[0]
            let follower = try InteractiveBskyctl(["events", "--account", alice.handle], socketPath: fixture.daemon.socketPath,
                                                  directory: fixture.directory.path)
            let raw = try EventListener(socketPath: fixture.daemon.socketPath)
            #expect(try await eventually { try await fixture.daemon.call("daemon.status")["events"]?["subscribers"]?.intValue == 2 })
            try await fixture.loginAll()
            #expect(await eventually { follower.stdout.contains("login.completed \(alice.handle): logged in (app-password)") },
                    "\(follower.stdout)")
            _ = await fixture.daemon.stop()
            #expect(await follower.wait() == 69, "\(follower.stderr)")
            #expect(follower.stdout.contains("daemon.stopping: blueskyd is stopping"), "\(follower.stdout)")
            #expect(follower.stderr.contains("blueskyd stopped"), "\(follower.stderr)")
            #expect(await eventually { raw.hasEnded }, "the raw stream ends after daemon.stopping")
            #expect(raw.kinds().last == "daemon.stopping")
        }
    }

    @Test("events.unsubscribe ends the stream; the connection goes on answering requests")
    func unsubscribe() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            try await fixture.loginAll()
            let connection = try RPCClientConnection(socketPath: fixture.daemon.socketPath, timeout: .seconds(30))
            defer { connection.close() }
            // Only refreshes: the profile fetched after the login may still be on its way.
            _ = try connection.call(method: "events.subscribe", params: ["kinds": ["account.refreshed"]]).get()
            let again = try connection.call(method: "events.subscribe")
            guard case .failure(let error) = again else { Issue.record("a second subscribe must fail"); return }
            #expect(error.name == "AlreadySubscribed")
            #expect(try await fixture.bskyctl(["refresh", fixture.accounts[0].handle]).status == 0)
            let event = try #require(try connection.readLineBytes().flatMap { try? JSONValue.parse($0) })
            #expect(event["method"] == "event" && event["params"]?["kind"] == "account.refreshed", "\(event)")
            let ended = try connection.call(method: "events.unsubscribe").get()
            #expect(ended["unsubscribed"] == true)
            #expect(try await fixture.bskyctl(["refresh", fixture.accounts[0].handle]).status == 0)
            let status = try connection.call(method: "daemon.status").get()
            #expect(status["accounts"]?.intValue == 1, "the next line is the reply, not an event")
        }
    }

    @Test("a subscriber that goes away is dropped at the next event; the others go on")
    func subscriberGoesAway() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let alice = fixture.accounts[0]
            try await fixture.loginAll()
            let staying = try EventListener(socketPath: fixture.daemon.socketPath, ["kinds": ["account.refreshed"]])
            defer { staying.close() }
            let leaving = try EventListener(socketPath: fixture.daemon.socketPath, ["kinds": ["account.refreshed"]])
            func subscribers() async throws -> Int? {
                try await fixture.daemon.call("daemon.status")["events"]?["subscribers"]?.intValue
            }
            #expect(try await subscribers() == 2)
            leaving.close()
            #expect(try await fixture.bskyctl(["refresh", alice.handle]).status == 0)
            try await staying.waitFor("account.refreshed")
            #expect(try await eventually { try await subscribers() == 1 }, "the closed connection's subscription ends")
            #expect(try await fixture.bskyctl(["refresh", alice.handle]).status == 0)
            #expect(await eventually { staying.kinds().count == 2 })
        }
    }

    @Test("profiles: fetched after login, shown by accounts.list and bskyctl accounts, updated when a call writes the record")
    func profiles() async throws {
        try await EndToEndFixture.with(names: ["alice"]) { fixture in
            let alice = fixture.accounts[0]
            let raw = try EventListener(socketPath: fixture.daemon.socketPath, ["kinds": ["account.profileUpdated"]])
            defer { raw.close() }
            try await fixture.loginAll()
            try await raw.waitFor("account.profileUpdated")
            let record: JSONValue = [
                "repo": .string(alice.did), "collection": "app.bsky.actor.profile", "rkey": "self",
                "record": ["$type": "app.bsky.actor.profile", "displayName": "Alice Events", "description": "hello",
                           "avatar": ["$type": "blob", "ref": ["$link": "bafkreiavatar1"], "mimeType": "image/png", "size": 10]],
            ]
            let write = try await fixture.bskyctl(["proxy", "com.atproto.repo.putRecord", "--input", "-"],
                                                  stdin: String(decoding: record.encoded(), as: UTF8.self))
            #expect(write.status == 0, "\(write.stderr)")
            #expect(await eventually { raw.notifications.contains { $0["profile"]?["displayName"] == "Alice Events" } },
                    "\(raw.notifications)")
            let profile = try #require(try await fixture.listedAccounts()[alice.handle]?["profile"])
            #expect(profile["displayName"] == "Alice Events")
            #expect(profile["description"] == "hello")
            #expect(profile["avatar"]?.stringValue?.contains("com.atproto.sync.getBlob") == true)
            #expect(profile["avatar"]?.stringValue?.contains("bafkreiavatar1") == true)
            #expect(try await fixture.bskyctl(["accounts"]).stdout.contains("Alice Events"))

            // A PDS that fails the profile read (a 500, then an HTML 502) changes nothing.
            let updates = raw.notifications.count
            let reads = fixture.testbed.requestCount(nsid: "com.atproto.repo.getRecord")
            for html in [false, true] {
                fixture.testbed.injectFailures(nsid: "com.atproto.repo.getRecord", status: html ? 502 : 500, count: 1,
                                               error: "InternalServerError", html: html)
                let refresh = try await fixture.bskyctl(["refresh", alice.handle])
                #expect(refresh.status == 0, "the refresh itself works: \(refresh.stderr)")
                let entry = try #require(try await fixture.listedAccounts()[alice.handle])
                #expect(entry["state"] == "active")
                #expect(entry["profile"]?["displayName"] == "Alice Events", "the last profile is kept")
            }
            #expect(fixture.testbed.requestCount(nsid: "com.atproto.repo.getRecord") >= reads + 2, "both refreshes read the profile")
            #expect(raw.notifications.count == updates, "no profileUpdated for a failed read")
            // Kept across a restart.
            try await fixture.restartDaemon()
            #expect(try await fixture.listedAccounts()[alice.handle]?["profile"]?["displayName"] == "Alice Events")
        }
    }
}

/// The process's resident set in KiB, from /proc.
func residentKiB(_ pid: Int32) throws -> Int {
    let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
    let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
    return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
}
