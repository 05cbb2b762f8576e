import ATPermissions
import Foundation
import JSONRPC
import NIOHTTP1
import Testing
import XRPC
@testable import BlueskyDaemon

@Suite("Client policies: [[client]] tables, the shape of a call, gateway tokens")
struct ClientPolicyConfigurationTests {
    let environment = ["HOME": "/home/u", "XDG_RUNTIME_DIR": "/run/user/1000", "XDG_STATE_HOME": "/home/u/.state"]

    @Test("[[client]] tables give each client its sockets, policy and accounts")
    func clients() throws {
        var configuration = DaemonConfiguration(environment: environment)
        try configuration.apply(toml: """
            log_level = "info"

            [[client]]
            name = "reader"
            socket = "/run/r.sock"
            gateway_socket = "/run/r-xrpc.sock"
            policy = "read"

            [[client]]
            name = "poster-2"
            gateway_socket = "/run/p.sock"
            policy = "repo:app.bsky.feed.post?action=create blob:image/*"
            accounts = ["alice.example.com", "did:plc:abc"]
            """, file: "c.toml")
        #expect(configuration.clients == [
            ClientSettings(name: "reader", socket: "/run/r.sock", gatewaySocket: "/run/r-xrpc.sock", policy: "read"),
            ClientSettings(name: "poster-2", gatewaySocket: "/run/p.sock",
                           policy: "repo:app.bsky.feed.post?action=create blob:image/*", accounts: ["alice.example.com", "did:plc:abc"]),
        ])
        #expect(configuration.clients[1].clientPolicy.grant?.description == "repo:app.bsky.feed.post?action=create blob:image/*")
        #expect(configuration.clients[0].gatewayDescriptorName == "reader-xrpc")
    }

    @Test("each mistake in a [[client]] names the client, the key and the line", arguments: [
        ("[[client]]\nname = \"r\"\nsocket = \"/s\"\ncolour = 1\n", "c.toml:1: [[client]]: unknown key 'colour'"),
        ("[[client]]\nsocket = \"/s\"\n", "c.toml:1: [[client]]: each client needs a name of lowercase letters, digits and '-'"),
        ("[[client]]\nname = \"Reader\"\nsocket = \"/s\"\n", "c.toml:1: [[client]]: each client needs a name"),
        ("[[client]]\nname = \"r\"\n", "c.toml:1: [[client]]: client 'r' needs a socket, a gateway_socket, or both"),
        ("[[client]]\nname = \"r\"\nsocket = \"/s\"\npolicy = \"rpc:timeline\"\n",
         "c.toml:1: [[client]]: client 'r': 'rpc:timeline' is not a permission: 'timeline' is not an NSID"),
        ("[[client]]\nname = \"r\"\nsocket = \"/s\"\naccounts = []\n", "c.toml:1: [[client]]: client 'r': accounts must be a non-empty array"),
        ("[[client]]\nname = \"r\"\nsocket = \"/s\"\n[[client]]\nname = \"r\"\nsocket = \"/t\"\n",
         "c.toml:1: [[client]]: two clients are named 'r'"),
        ("client = \"r\"\n", "[[client]]: write each client as a [[client]] table"),
        ("[[client]]\nname = \"r\"\nsocket = \"/s\"\npolicy = \"include:app.bsky.authFullApp\"\n",
         "client 'r': 'include:app.bsky.authFullApp' is not a permission: a permission set (include:) is resolved by an authorization server"),
    ])
    func mistakes(toml: String, message: String) {
        var configuration = DaemonConfiguration(environment: environment)
        #expect {
            try configuration.apply(toml: toml, file: "c.toml")
        } throws: { error in
            "\(error)".contains(message)
        }
    }
}

@Suite("What a call needs, read from the call")
struct CallShapeTests {
    func call(_ nsid: String, input: String? = nil, parameters: [(String, XRPCParameter)] = [], proxy: String? = nil) -> XRPCCall {
        XRPCCall(nsid: nsid, account: nil, kind: nsid.contains(".get") ? .query : .procedure, parameters: parameters,
                 body: input.map { .json(Array($0.utf8)) }, atprotoProxy: proxy, acceptLabelers: nil)
    }

    @Test("record writes name their collections and actions, applyWrites each of its writes")
    func writes() {
        let create = CallShape(call("com.atproto.repo.createRecord", input: #"{"collection":"app.bsky.feed.like","record":{}}"#), uploadType: nil)
        #expect(create.needs == [.repo(collection: "app.bsky.feed.like", action: .create)])
        let put = CallShape(call("com.atproto.repo.putRecord", input: #"{"collection":"app.bsky.actor.profile"}"#), uploadType: nil)
        #expect(put.needs == [.repo(collection: "app.bsky.actor.profile", action: .create), .repo(collection: "app.bsky.actor.profile", action: .update)])
        let batch = CallShape(call("com.atproto.repo.applyWrites", input: #"""
            {"repo":"did:plc:a","writes":[
              {"$type":"com.atproto.repo.applyWrites#create","collection":"app.bsky.feed.post","value":{}},
              {"$type":"com.atproto.repo.applyWrites#delete","collection":"app.bsky.graph.follow","rkey":"x"}]}
            """#), uploadType: nil)
        #expect(batch.needs == [.repo(collection: "app.bsky.feed.post", action: .create), .repo(collection: "app.bsky.graph.follow", action: .delete)])
        // An input that says nothing readable needs the wildcard.
        let garbage = CallShape(call("com.atproto.repo.deleteRecord", input: "not json"), uploadType: nil)
        #expect(garbage.needs == [.repo(collection: "*", action: .delete)])
    }

    @Test("an upload needs its media type; a service token the method it is for; other calls their own rpc")
    func others() {
        #expect(CallShape(call("com.atproto.repo.uploadBlob"), uploadType: "image/png").needs == [.blob(mediaType: "image/png")])
        let token = CallShape(call("com.atproto.server.getServiceAuth", parameters: [("aud", .single("did:web:x")), ("lxm", .single("app.bsky.video.uploadVideo"))]),
                              uploadType: nil)
        #expect(token.needs == [.rpc(method: "app.bsky.video.uploadVideo", audience: "did:web:x", isQuery: false)])
        let timeline = CallShape(call("app.bsky.feed.getTimeline", proxy: "did:web:api.bsky.app#bsky_appview"), uploadType: nil)
        #expect(timeline.needs == [.rpc(method: "app.bsky.feed.getTimeline", audience: "did:web:api.bsky.app#bsky_appview", isQuery: true)])
    }

    @Test("a policy refuses with the client's name, the rule and the permission needed")
    func refusal() throws {
        let policy = try ClientPolicy.parse(name: "reader", policy: "read", accounts: nil)
        let refusal = #expect(throws: DaemonError.self) {
            try policy.check(call("com.atproto.repo.createRecord", input: #"{"collection":"app.bsky.feed.post"}"#))
        }
        #expect(refusal?.rpcError.data["client"] == "reader")
        #expect(refusal?.rpcError.data["rule"] == "policy = \"read\"")
        #expect(refusal?.rpcError.data["permission"] == "repo:app.bsky.feed.post?action=create")
        try policy.check(call("app.bsky.feed.getTimeline"))
    }
}

@Suite("Gateway tokens and how a request carries one")
struct GatewayTokenTests {
    @Test("tokens are opaque, bound to their policy, and dead once revoked")
    func lifecycle() throws {
        let tokens = GatewayTokens()
        let policy = try ClientPolicy.parse(name: "exec:post.py", policy: "read", accounts: ["alice.test"])
        let token = tokens.issue(policy)
        #expect(token.hasPrefix("bskyd-gw-") && token.count > 40 && !token.contains("."))
        #expect(tokens.policy(of: token) == policy)
        #expect(tokens.policy(of: token + "x") == nil)
        #expect(tokens.policy(of: "eyJhbGciOiJFUzI1NiJ9.e30.sig") == nil)
        #expect(tokens.revoke(token))
        #expect(tokens.policy(of: token) == nil)
        #expect(!tokens.revoke(token))
        #expect(tokens.issue(policy) != token, "every token is new")
    }

    @Test("a token comes as the base URL's /t/<token> prefix or as Authorization: Bearer; other Authorization is the program's own")
    func carried() {
        let byPath = GatewayCaller(uri: "/t/bskyd-gw-abc/xrpc/app.bsky.feed.getTimeline?limit=5", headers: [:])
        #expect(byPath.token == "bskyd-gw-abc")
        #expect(byPath.uri == "/xrpc/app.bsky.feed.getTimeline?limit=5")
        let byHeader = GatewayCaller(uri: "/xrpc/x.y.z", headers: ["Authorization": "Bearer bskyd-gw-def"])
        #expect(byHeader.token == "bskyd-gw-def" && byHeader.uri == "/xrpc/x.y.z")
        let sdkOwn = GatewayCaller(uri: "/xrpc/x.y.z", headers: ["Authorization": "Bearer eyJ.e30.sig"])
        #expect(sdkOwn.token == nil)
        let dpop = GatewayCaller(uri: "/xrpc/x.y.z", headers: ["Authorization": "DPoP bskyd-gw-def"])
        #expect(dpop.token == nil)
    }
}

@Suite("ScopeMissingError, as the reference PDS words it")
struct MissingScopeTests {
    @Test(arguments: [
        ("ScopeMissingError", #"Missing required scope "repo:app.bsky.feed.post?action=delete""#, "repo:app.bsky.feed.post?action=delete"),
        ("ScopeMissingError", "Missing required scope: rpc:app.bsky.feed.getTimeline?aud=* (or equivalent)", "rpc:app.bsky.feed.getTimeline?aud=*"),
        ("InvalidToken", #"Missing required scope "blob:image/*""#, "blob:image/*"),
        ("ScopeMissingError", nil, "(unnamed)"),
    ] as [(String, String?, String)])
    func named(error: String, message: String?, scope: String) {
        #expect(XRPCProxy.missingScope(XRPCErrorBody(error: error, message: message)) == scope)
    }

    @Test func otherRefusalsAreNotScopes() {
        #expect(XRPCProxy.missingScope(XRPCErrorBody(error: "InvalidToken", message: "Bad token scope")) == nil)
        #expect(XRPCProxy.missingScope(XRPCErrorBody(error: "AuthRequired", message: nil)) == nil)
    }

    @Test("+<scope> adds to the granted scope, once")
    func widened() {
        #expect(AccountManager.widened("atproto repo:app.bsky.feed.post?action=create", by: "repo:app.bsky.feed.post?action=delete atproto")
                == "atproto repo:app.bsky.feed.post?action=create repo:app.bsky.feed.post?action=delete")
    }
}
