import ATPermissions
import Testing

@Suite struct PermissionParsingTests {
    @Test(arguments: [
        ("repo:app.bsky.feed.post", "repo:app.bsky.feed.post"),
        ("repo:app.bsky.feed.post?action=create", "repo:app.bsky.feed.post?action=create"),
        ("repo:*?action=delete&action=create", "repo:*?action=create&action=delete"),
        ("repo?collection=app.bsky.feed.like&action=update", "repo:app.bsky.feed.like?action=update"),
        ("rpc:app.bsky.feed.getTimeline", "rpc:app.bsky.feed.getTimeline"),
        ("rpc:app.bsky.feed.getTimeline?aud=did:web:api.bsky.app%23bsky_appview",
         "rpc:app.bsky.feed.getTimeline?aud=did:web:api.bsky.app%23bsky_appview"),
        ("rpc?lxm=*&aud=*", "rpc:*"),
        ("blob:image/*", "blob:image/*"),
        ("blob?accept=image/png&accept=video/*", "blob?accept=image/png&accept=video/*"),
        ("account:email", "account:email"),
        ("account:status?action=manage", "account:status?action=manage"),
        ("identity:handle", "identity:handle"),
        ("include:app.bsky.authFullApp?aud=did:web:api.bsky.app%23bsky_appview",
         "include:app.bsky.authFullApp?aud=did:web:api.bsky.app%23bsky_appview"),
        ("transition:generic", "transition:generic"),
        ("atproto", "atproto"),
        ("read", "read"),
    ])
    func readsAndWritesBack(token: String, written: String) throws {
        #expect(try Permission(parsing: token).description == written)
    }

    @Test(arguments: [
        "repo", "repo:not-an-nsid", "repo:app.bsky.feed.post?action=publish", "repo:app.bsky.feed.post?colour=red",
        "rpc", "rpc:app.bsky.feed.getTimeline?aud=api.bsky.app", "blob", "blob:image", "blob:*/png", "account:password",
        "account:email?action=write", "identity:email", "write", "repo:app.bsky.feed.post?action", "blob:image/%zz",
        "transition:everything", "include:", "",
    ])
    func refusesWhatIsNotAPermission(token: String) {
        #expect(throws: PermissionSyntaxError.self) { try Permission(parsing: token) }
    }

    @Test func theErrorNamesThePermissionAndWhy() {
        #expect(throws: PermissionSyntaxError(permission: "repo:app.bsky.feed.post?action=publish",
                                               reason: "action is create, update or delete, not 'publish'")) {
            try Permission(parsing: "repo:app.bsky.feed.post?action=publish")
        }
    }
}

@Suite struct PermissionNeedTests {
    @Test func recordWritesNeedTheirCollectionAndAction() {
        let create = CallShape(method: "com.atproto.repo.createRecord", isQuery: false,
                               writes: [(collection: "app.bsky.feed.post", action: .create)])
        #expect(create.needs == [.repo(collection: "app.bsky.feed.post", action: .create)])
        let unknown = CallShape(method: "com.atproto.repo.deleteRecord", isQuery: false)
        #expect(unknown.needs.count == 3)
        #expect(unknown.needs.allSatisfy { if case .repo("*", _) = $0 { true } else { false } })
    }

    @Test func serviceTokensNeedTheMethodTheyAreFor() {
        let shape = CallShape(method: "com.atproto.server.getServiceAuth", isQuery: true,
                              serviceTokenMethod: "app.bsky.video.uploadVideo", serviceTokenAudience: "did:web:video.bsky.app")
        #expect(shape.needs == [.rpc(method: "app.bsky.video.uploadVideo", audience: "did:web:video.bsky.app", isQuery: false)])
    }

    @Test func accountAndIdentityCallsNeedThoseResources() {
        #expect(CallShape(method: "com.atproto.server.deleteAccount", isQuery: false).needs == [.account(attribute: "*", action: .manage)])
        #expect(CallShape(method: "com.atproto.server.updateEmail", isQuery: false).needs == [.account(attribute: "email", action: .manage)])
        #expect(CallShape(method: "com.atproto.identity.updateHandle", isQuery: false).needs == [.identity(attribute: "handle")])
        #expect(CallShape(method: "com.atproto.identity.submitPlcOperation", isQuery: false).needs == [.identity(attribute: "*")])
    }

    @Test func publicReadsAndTheSessionNeedNothing() {
        for method in ["com.atproto.server.getSession", "com.atproto.repo.getRecord", "com.atproto.sync.getRepo"] {
            #expect(CallShape(method: method, isQuery: true).needs.isEmpty)
        }
    }

    @Test func otherCallsNeedRPC() {
        let shape = CallShape(method: "app.bsky.feed.getTimeline", isQuery: true, audience: "did:web:api.bsky.app#bsky_appview")
        #expect(shape.needs == [.rpc(method: "app.bsky.feed.getTimeline", audience: "did:web:api.bsky.app#bsky_appview", isQuery: true)])
        #expect(shape.needs[0].description == "rpc:app.bsky.feed.getTimeline?aud=did:web:api.bsky.app%23bsky_appview")
    }
}

@Suite struct PermissionGrantTests {
    func grant(_ text: String) throws -> PermissionGrant { try PermissionGrant(parsing: text) }
    let post = PermissionNeed.repo(collection: "app.bsky.feed.post", action: .create)
    let deletePost = PermissionNeed.repo(collection: "app.bsky.feed.post", action: .delete)
    let timeline = PermissionNeed.rpc(method: "app.bsky.feed.getTimeline", audience: nil, isQuery: true)
    let preferences = PermissionNeed.rpc(method: "app.bsky.actor.putPreferences", audience: nil, isQuery: false)
    let serviceToken = PermissionNeed.rpc(method: "*", audience: "did:web:x", isQuery: false)

    @Test func readGrantsQueriesOnly() throws {
        let read = try grant("read")
        #expect(read.grants(timeline))
        #expect(!read.grants(preferences))
        #expect(!read.grants(post))
        #expect(!read.grants(serviceToken))
        #expect(!read.grants(.blob(mediaType: "image/png")))
        #expect(!read.grants(.account(attribute: "email", action: .read)))
    }

    @Test func repoGrantsItsCollectionAndActions() throws {
        let createOnly = try grant("repo:app.bsky.feed.post?action=create")
        #expect(createOnly.grants(post))
        #expect(!createOnly.grants(deletePost))
        #expect(try grant("repo:*?action=delete").grants(deletePost))
        #expect(!createOnly.grants(.repo(collection: "app.bsky.feed.like", action: .create)))
        #expect(createOnly.firstMissing([post, deletePost]) == deletePost)
    }

    @Test func rpcMatchesMethodAndAudience() throws {
        #expect(try grant("rpc:app.bsky.feed.getTimeline").grants(timeline))
        let appview = try grant("rpc:*?aud=did:web:api.bsky.app%23bsky_appview")
        #expect(appview.grants(.rpc(method: "app.bsky.feed.getTimeline", audience: "did:web:api.bsky.app#bsky_appview", isQuery: true)))
        #expect(!appview.grants(.rpc(method: "chat.bsky.convo.sendMessage", audience: "did:web:api.bsky.chat#bsky_chat", isQuery: false)))
    }

    @Test func blobMatchesMediaRanges() throws {
        let images = try grant("blob:image/*")
        #expect(images.grants(.blob(mediaType: "image/jpeg")))
        #expect(images.grants(.blob(mediaType: "IMAGE/PNG; charset=binary")))
        #expect(!images.grants(.blob(mediaType: "video/mp4")))
        #expect(try grant("blob:*/*").grants(.blob(mediaType: "video/mp4")))
    }

    @Test func genericGrantsNoAccountOrIdentity() throws {
        let generic = try grant("atproto transition:generic")
        #expect(generic.grants(post) && generic.grants(preferences) && generic.grants(serviceToken))
        #expect(!generic.grants(.account(attribute: "*", action: .manage)))
        #expect(!generic.grants(.identity(attribute: "handle")))
        #expect(try grant("account:*?action=manage").grants(.account(attribute: "email", action: .read)))
        #expect(!(try grant("account:email")).grants(.account(attribute: "email", action: .manage)))
        #expect(try grant("identity:*").grants(.identity(attribute: "handle")))
    }
}
