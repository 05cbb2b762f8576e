import ATPermissions
import BlueskyHTTP
import Foundation
import JSONRPC
import NIOCore
import NIOHTTP1
import PropertyBased
import Testing
@testable import BlueskyDaemon
@testable import XRPC
import XRPCGateway

/// One canonical request: what a policy checks is what the server is sent, or nothing is sent.
@Suite("One canonical request: NSID spelling, decisive parameters, write types, method overrides")
struct CanonicalRequestTests {
    static let methods = LexiconMethods.bundled.filter { $0.value != .subscription }.keys.sorted()

    static func request(_ method: HTTPMethod, _ uri: String, body: String = "") -> GatewayRequest {
        GatewayRequest(method: method, uri: uri, headers: HTTPHeaders([("Content-Type", "application/json")]),
                       body: .whole(ByteBuffer(string: body)), peer: nil)
    }

    /// A spelling of `nsid` an attacker might send: letters flipped in case, a character
    /// escaped, something trailing.
    static func spelling(_ nsid: String, flips: [Bool], escape: Int?, trailing: String) -> String {
        var characters = Array(nsid).enumerated().map { index, character -> String in
            let flipped = flips[index % flips.count] ? (character.isUppercase ? character.lowercased() : character.uppercased()) : String(character)
            return flipped
        }
        if let escape { characters[escape % characters.count] = String(format: "%%%02X", Array(characters[escape % characters.count].utf8)[0]) }
        return characters.joined() + trailing
    }

    @Test("every bundled method in generated spellings: refused, or sent in the Lexicons' spelling and checked as that method")
    func everySpellingIsRefusedOrCanonical() async {
        let trailing = ["", "", "/", ".", "%20", "x", ";", "%00", "?", "#"]
        await propertyCheck(count: 3_000, input: Gen.element(of: Self.methods), Gen.bool.array(of: 1...8),
                            Gen.int(in: 0...40).optional(valueRate: 0.2), Gen.element(of: trailing)) { nsid, flips, escape, tail in
            guard let nsid, let tail else { return }
            let written = Self.spelling(nsid, flips: flips, escape: escape, trailing: tail)
            let kind = LexiconMethods.kind(of: nsid) ?? .query
            let route = XRPCRoute.of(Self.request(kind == .procedure ? .POST : .GET, "/xrpc/" + written, body: kind == .procedure ? "{}" : ""))
            guard case .call(let call, _) = route else { return }  // refused: nothing sent
            // What the path names (a `?` starts the query).
            let named = String(written.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0])
            let canonical = nsid.lowercased() == named.lowercased() ? nsid : named
            #expect(call.nsid == canonical, "\(written) was sent as \(call.nsid)")
            // What is sent is the spelling that was checked.
            let sent = XRPCRequest(service: URL(string: "https://pds.example")!, nsid: call.nsid, kind: call.kind).url.path
            #expect(sent == "/xrpc/" + call.nsid)
            let checked = CallShape(call, uploadType: nil).needs.map(\.description)
            var exact = call
            exact.nsid = nsid
            if nsid.lowercased() == named.lowercased() {
                #expect(checked == CallShape(exact, uploadType: nil).needs.map(\.description), "\(written) needs what \(nsid) needs")
            }
        }
    }

    @Test("case variants resolve to the Lexicons' spelling; a known namespace's unknown method is refused; another namespace keeps its name, its authority lowercased")
    func canonicalNSIDs() {
        #expect(LexiconMethods.canonical("Com.atproto.server.getServiceAuth") == .known("com.atproto.server.getServiceAuth", .query))
        #expect(LexiconMethods.canonical("COM.ATPROTO.REPO.CREATERECORD") == .known("com.atproto.repo.createRecord", .procedure))
        #expect(LexiconMethods.canonical("com.atproto.server.getServiceAuthorization") == .refused(namespace: "com.atproto.server"))
        #expect(LexiconMethods.canonical("Com.Example.Feed.getThings") == .unknown("com.example.feed.getThings"))
        // A known method called the other way is refused on both fronts.
        guard case .refused = XRPCRoute.of(Self.request(.GET, "/xrpc/com.atproto.repo.createRecord")) else {
            Issue.record("a GET of a procedure was routed"); return
        }
        #expect(throws: DaemonError.self) { _ = try XRPCCall(params: Params(["nsid": "com.atproto.repo.createRecord", "kind": "query"])) }
        #expect(throws: DaemonError.self) { _ = try XRPCCall(params: Params(["nsid": "com.atproto.sync.subscribeRepos"])) }
        let call = try? XRPCCall(params: Params(["nsid": "COM.atproto.repo.createRecord", "input": [:]]))
        #expect(call?.nsid == "com.atproto.repo.createRecord" && call?.kind == .procedure)
    }

    @Test("a parameter that decides a permission, given twice, is refused on both fronts")
    func repeatedDecisiveParameters() {
        for query in ["aud=did:web:a&aud=did:web:b", "aud=did:web:a&lxm=x&lxm=y", "aud=did:web:a&exp=1&exp=2"] {
            guard case .refused(let refusal) = XRPCRoute.of(Self.request(.GET, "/xrpc/com.atproto.server.getServiceAuth?" + query)) else {
                Issue.record("\(query) was routed"); continue
            }
            #expect(refusal.status == .badRequest)
        }
        #expect(throws: DaemonError.self) {
            _ = try XRPCCall(params: Params(["nsid": "com.atproto.server.getServiceAuth", "params": ["aud": ["did:web:a", "did:web:b"]]]))
        }
        // Elsewhere a list is a list (getProfiles' actors).
        guard case .call = XRPCRoute.of(Self.request(.GET, "/xrpc/app.bsky.actor.getProfiles?actors=a&actors=b")) else {
            Issue.record("a list parameter was refused"); return
        }
    }

    @Test("an applyWrites entry of a type the PDS does not take as written needs every action")
    func unknownWriteTypes() throws {
        let grant = try PermissionGrant(parsing: "repo:app.bsky.feed.post?action=create")
        for type in ["com.atproto.repo.applyWrites#Delete", "#remove", "app.bsky.feed.post#create", ""] {
            let input: JSONValue = ["writes": [["$type": .string(type), "collection": "app.bsky.feed.post", "value": [:]]]]
            let shape = CallShape(method: "com.atproto.repo.applyWrites", isQuery: false,
                                  writes: CallShape.writes(of: "com.atproto.repo.applyWrites", input: input))
            #expect(grant.firstMissing(shape.needs)?.description == "repo:app.bsky.feed.post?action=update", "\(type)")
        }
        let create: JSONValue = ["writes": [["$type": "com.atproto.repo.applyWrites#create", "collection": "app.bsky.feed.post"]]]
        let shape = CallShape(method: "com.atproto.repo.applyWrites", isQuery: false,
                              writes: CallShape.writes(of: "com.atproto.repo.applyWrites", input: create))
        #expect(grant.firstMissing(shape.needs) == nil)
    }

    @Test("_method however written, in the query or a form, JSON or multipart body, is an override; ordinary bodies are not", arguments: [
        ("_method=DELETE", nil), ("a=1&_METHOD=delete", nil), ("%5Fmethod=delete", nil), ("_%6Dethod=delete", nil), ("+_method=delete", nil),
        (nil, "_method=delete"), (nil, "status=hi;_method=delete"), (nil, "%5fmethod=delete"), (nil, "_method[]=delete"),
        (nil, #"{"\u005fmethod":"delete"}"#), (nil, #"{"status":"x","nested":{"_Method":"put"}}"#), (nil, #"{"_method":"delete",}"#),
        (nil, "--b\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\ndelete\r\n--b--"),
        (nil, "--b\r\nContent-Disposition: form-data; name*=utf-8''%5Fmethod\r\n\r\ndelete\r\n--b--"),
    ] as [(String?, String?)])
    func overrides(query: String?, body: String?) throws {
        let call = try HTTPCall(account: nil, method: "POST", path: "/api/v1/statuses/1", query: query, headers: [], body: body.map { Array($0.utf8) })
        #expect(call.methodOverride != nil)
    }

    @Test("bodies that only mention a method are no override", arguments: [
        "status=my_method", "status=_method", #"{"status":"the _method key"}"#, "plain text", #"{"a":[1,2,{"b":"_method"}]}"#,
    ])
    func notOverrides(body: String) throws {
        let call = try HTTPCall(account: nil, method: "POST", path: "/api/v1/statuses", query: "visibility=public", headers: [],
                                body: Array(body.utf8))
        #expect(call.methodOverride == nil)
    }

    @Test("a method-restricted grant refuses an override or a body it cannot read; a grant of every method allows them")
    func methodRestrictedGrants() throws {
        let restricted = try ClientPolicy.parse(name: "poster", policy: "http:POST:/api/v1/statuses*", accounts: nil)
        var call = try HTTPCall(account: nil, method: "POST", path: "/api/v1/statuses/1", query: "_method=DELETE", headers: [], body: nil)
        #expect(throws: DaemonError.self) { try restricted.check(http: call) }
        call.query = nil
        call.bodyIsStreamed = true
        #expect(throws: DaemonError.self) { try restricted.check(http: call) }
        let every = try ClientPolicy.parse(name: "all", policy: "http:*:/api/*", accounts: nil)
        #expect(throws: Never.self) { try every.check(http: call) }
        for method in ["TRACE", "CONNECT", "PROPFIND", "get x"] {
            #expect(throws: DaemonError.self) { _ = try HTTPCall(account: nil, method: method, path: "/", query: nil, headers: [], body: nil) }
        }
        for method in ["get", "HEAD", "post", "PUT", "PATCH", "DELETE", "OPTIONS"] {
            #expect(throws: Never.self) { _ = try HTTPCall(account: nil, method: method, path: "/", query: nil, headers: [], body: nil) }
        }
    }

    @Test("getSession keeps its email fields only for a client granted account:email")
    func getSessionEmail() throws {
        let answer = InboundResponse(status: 200, headers: [], body: Array(#"{"did":"did:plc:a","email":"a@b","emailConfirmed":true,"emailAuthFactor":false}"#.utf8))
        let hidden = try JSONValue.parse(XRPCProxy.withoutEmail(answer).body)
        #expect(hidden == ["did": "did:plc:a"])
        let garbage = XRPCProxy.withoutEmail(InboundResponse(status: 200, headers: [], body: Array("not json".utf8)))
        #expect(garbage.body == Array("{}".utf8))
    }
}
