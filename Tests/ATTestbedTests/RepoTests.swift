import ATTestbed
import Foundation
import Testing

@Suite("Testbed PDS records, feeds and blobs")
struct RepoTests {
    private func createPost(_ harness: TestbedHarness, _ account: TestAccount, _ access: String, _ text: String, rkey: String? = nil)
        async throws -> TestResponse
    {
        var body: [String: any Sendable] = [
            "repo": account.did, "collection": "app.bsky.feed.post",
            "record": ["$type": "app.bsky.feed.post", "text": text, "createdAt": "2026-01-01T00:00:00.000Z"],
        ]
        if let rkey { body["rkey"] = rkey }
        return try await harness.pds.send(.post("/xrpc/com.atproto.repo.createRecord", json: body, bearer: access))
    }

    @Test("createRecord, getRecord and deleteRecord round-trip")
    func recordRoundTrip() async throws {
        try await TestbedHarness.with { harness in
            let account = await harness.testbed.createAccount(AccountSpec(name: "alice"))
            let access = try await harness.login(account).access

            let created = try await createPost(harness, account, access, "hello")
            #expect(created.status == 200)
            let uri = try #require(created["uri"])
            let cid = try #require(created["cid"])
            #expect(uri.hasPrefix("at://\(account.did)/app.bsky.feed.post/"))
            #expect(cid.hasPrefix("bafyrei"))
            let rkey = String(uri.split(separator: "/").last!)
            #expect(rkey.count == 13)

            let query = "repo=\(account.did)&collection=app.bsky.feed.post&rkey=\(rkey)"
            let fetched = try await harness.pds.send(.get("/xrpc/com.atproto.repo.getRecord?\(query)", bearer: access))
            #expect(fetched.status == 200)
            #expect(fetched["uri"] == uri)
            #expect(fetched["cid"] == cid)
            #expect((fetched.json["value"] as? [String: any Sendable])?["text"] as? String == "hello")

            let deleted = try await harness.pds.send(
                .post(
                    "/xrpc/com.atproto.repo.deleteRecord",
                    json: ["repo": account.handle, "collection": "app.bsky.feed.post", "rkey": rkey], bearer: access))
            #expect(deleted.status == 200)
            let missing = try await harness.pds.send(.get("/xrpc/com.atproto.repo.getRecord?\(query)", bearer: access))
            #expect(missing.status == 400)
            #expect(missing.errorName == "RecordNotFound")
        }
    }

    @Test("Writing to another account's repo is refused")
    func foreignRepoWrite() async throws {
        try await TestbedHarness.with { harness in
            let alice = await harness.testbed.createAccount(AccountSpec(name: "alice"))
            let bob = await harness.testbed.createAccount(AccountSpec(name: "bob"))
            let aliceAccess = try await harness.login(alice).access
            let response = try await createPost(harness, bob, aliceAccess, "not mine")
            #expect(response.status == 401)
            #expect(harness.testbed.recordCount(did: bob.did, collection: "app.bsky.feed.post") == 0)
        }
    }

    @Test("listRecords pages newest first with a cursor, and oldest first with reverse")
    func listRecordsPaging() async throws {
        try await TestbedHarness.with { harness in
            let account = await harness.testbed.createAccount(AccountSpec(name: "carol"))
            let access = try await harness.login(account).access
            let keys = ["3aaaaaaaaaaa2", "3aaaaaaaaaaa3", "3aaaaaaaaaaa4", "3aaaaaaaaaaa5", "3aaaaaaaaaaa6"]
            for key in keys.shuffled() {
                #expect(try await createPost(harness, account, access, key, rkey: key).status == 200)
            }
            func page(_ extra: String) async throws -> (keys: [String], cursor: String?) {
                let response = try await harness.pds.send(
                    .get("/xrpc/com.atproto.repo.listRecords?repo=\(account.handle)&collection=app.bsky.feed.post&limit=2\(extra)"))
                let records = response.json["records"] as? [[String: any Sendable]] ?? []
                return (records.compactMap { ($0["uri"] as? String)?.split(separator: "/").last.map(String.init) }, response["cursor"])
            }
            var seen: [String] = []
            var cursor: String?
            repeat {
                let result = try await page(cursor.map { "&cursor=\($0)" } ?? "")
                seen += result.keys
                cursor = result.cursor
            } while cursor != nil
            #expect(seen == keys.reversed())
            #expect(try await page("&reverse=true").keys == Array(keys.prefix(2)))
        }
    }

    @Test("getTimeline pages every account's posts newest first, without a cursor at the end")
    func timelinePaging() async throws {
        try await TestbedHarness.with { harness in
            let alice = await harness.testbed.createAccount(AccountSpec(name: "alice", initialPosts: 4))
            _ = await harness.testbed.createAccount(AccountSpec(name: "bob", initialPosts: 3))
            let access = try await harness.login(alice).access
            var uris: [String] = []
            var cursor: String?
            var pages = 0
            repeat {
                let query = "limit=3" + (cursor.map { "&cursor=\($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)" } ?? "")
                let response = try await harness.pds.send(.get("/xrpc/app.bsky.feed.getTimeline?\(query)", bearer: access))
                #expect(response.status == 200)
                let feed = response.json["feed"] as? [[String: any Sendable]] ?? []
                uris += feed.compactMap { ($0["post"] as? [String: any Sendable])?["uri"] as? String }
                cursor = response["cursor"]
                pages += 1
            } while cursor != nil && pages < 10
            #expect(uris.count == 7)
            #expect(Set(uris).count == 7)
            #expect(pages == 3)
            let keys = uris.map { $0.split(separator: "/").last! }
            #expect(keys == keys.sorted(by: >))
        }
    }

    @Test("getProfile and resolveHandle describe the account")
    func profileAndResolve() async throws {
        try await TestbedHarness.with { harness in
            let account = await harness.testbed.createAccount(AccountSpec(name: "dana", initialPosts: 2))
            let access = try await harness.login(account).access
            let profile = try await harness.pds.send(.get("/xrpc/app.bsky.actor.getProfile?actor=\(account.handle)", bearer: access))
            #expect(profile["did"] == account.did)
            #expect(profile.json["postsCount"] as? Int == 2)
            let resolved = try await harness.pds.send(.get("/xrpc/com.atproto.identity.resolveHandle?handle=\(account.handle)"))
            #expect(resolved["did"] == account.did)
            let unknown = try await harness.pds.send(.get("/xrpc/com.atproto.identity.resolveHandle?handle=nobody.tb1.test"))
            #expect(unknown.status == 400)
        }
    }

    @Test("uploadBlob answers a blob ref with a raw-codec CID, size and MIME type")
    func uploadBlob() async throws {
        try await TestbedHarness.with { harness in
            let account = await harness.testbed.createAccount(AccountSpec(name: "eve"))
            let access = try await harness.login(account).access
            let bytes = [UInt8](repeating: 7, count: 2 * 1024 * 1024)
            var request = TestRequest(.POST, "/xrpc/com.atproto.repo.uploadBlob", body: bytes)
            request.headers.add(name: "Content-Type", value: "image/png")
            request.headers.add(name: "Authorization", value: "Bearer \(access)")
            let response = try await harness.pds.send(request)
            #expect(response.status == 200)
            let blob = try #require(response.json["blob"] as? [String: any Sendable])
            #expect(blob["$type"] as? String == "blob")
            #expect(blob["mimeType"] as? String == "image/png")
            #expect(blob["size"] as? Int == bytes.count)
            #expect(((blob["ref"] as? [String: any Sendable])?["$link"] as? String)?.hasPrefix("bafkrei") == true)
        }
    }
}
