import BlueskyHTTP
import JSONRPC
import Testing
import XRPC
@testable import BlueskyDaemon

@Suite("xrpc.call params")
struct XRPCCallTests {
    func call(_ params: JSONValue) throws(DaemonError) -> XRPCCall {
        try XRPCCall(params: try Params(params))
    }

    /// The field named by the error these params get; nil when they are accepted.
    func field(_ params: JSONValue) -> String? {
        do {
            _ = try call(params)
            return nil
        } catch {
            return error.rpcError.data["field"]?.stringValue ?? error.rpcError.name
        }
    }

    @Test("the kind comes from the Lexicons, or from `kind` for other NSIDs")
    func kinds() throws {
        #expect(try call(["nsid": "app.bsky.feed.getTimeline"]).kind == .query)
        #expect(try call(["nsid": "com.atproto.repo.createRecord", "input": [:]]).kind == .procedure)
        #expect(try call(["nsid": "com.example.thing", "kind": "procedure"]).kind == .procedure)
        #expect(field(["nsid": "com.example.thing"]) == "kind")
        #expect(field(["nsid": "com.example.thing", "kind": "stream"]) == "kind")
        #expect(field(["nsid": "com.atproto.sync.subscribeRepos"]) == "nsid")
        #expect(field(["nsid": "not an nsid"]) == "nsid")
        #expect(field([:]) == "nsid")
    }

    @Test("params become query strings; arrays repeat the key")
    func parameters() throws {
        let parsed = try call(["nsid": "app.bsky.actor.getProfiles",
                               "params": ["actors": ["a.test", "b.test"], "limit": 5, "reverse": true, "cursor": nil]])
        #expect(parsed.parameters.map(\.0) == ["actors", "limit", "reverse"])
        #expect(parsed.parameters[0].1 == .list(["a.test", "b.test"]))
        #expect(parsed.parameters[1].1 == .single("5"))
        #expect(parsed.parameters[2].1 == .single("true"))
        #expect(field(["nsid": "app.bsky.feed.getTimeline", "params": ["x": ["y": 1]]]) == "params.x")
    }

    @Test("bodies: JSON input, or base64 bytes with a content type; never both, never for a query")
    func bodies() throws {
        let upload = try call(["nsid": "com.atproto.repo.uploadBlob", "inputBase64": "/9g=", "contentType": "image/jpeg"])
        #expect(upload.body == .bytes([0xFF, 0xD8], contentType: "image/jpeg"))
        #expect(field(["nsid": "com.atproto.repo.uploadBlob", "inputBase64": "%%%"]) == "inputBase64")
        #expect(field(["nsid": "com.atproto.repo.createRecord", "input": [:], "inputBase64": "AA=="]) == "input")
        #expect(field(["nsid": "app.bsky.feed.getTimeline", "input": [:]]) == "input")
        #expect(field(["nsid": "app.bsky.feed.getTimeline", "proxy": "not-a-did"]) == "proxy")
        // Nothing that could split a header reaches one.
        #expect(field(["nsid": "app.bsky.feed.getTimeline", "proxy": "did:web:x#svc\r\nX-Evil: 1"]) == "proxy")
        #expect(field(["nsid": "com.atproto.repo.uploadBlob", "inputBase64": "AA==", "contentType": "image/png\nX: 1"])
                == "contentType")
    }

    @Test("a JSON answer reaches the client as the PDS wrote it; other bodies as base64")
    func resultBodies() {
        let json = #"{"zeta":1,"alpha":12345678901234567890,"nested":{"b":2,"a":1}}"#
        let answer = InboundResponse(status: 200, headers: [("Content-Type", "application/json; charset=utf-8"),
                                                            ("RateLimit-Remaining", "99")], body: Array(json.utf8))
        let line = String(decoding: XRPCProxy.result(of: answer).encoded(), as: UTF8.self)
        #expect(line.contains(#""body":\#(json)"#), "key order and every digit kept: \(line)")
        #expect(line.contains(#""ratelimit-remaining":"99""#))

        let broken = InboundResponse(status: 502, headers: [("Content-Type", "application/json")], body: Array("{oops".utf8))
        #expect(XRPCProxy.result(of: broken)["bodyBase64"]?.stringValue == "e29vcHM=",
                "a body that claims JSON but is not is passed on as bytes")
    }
}
