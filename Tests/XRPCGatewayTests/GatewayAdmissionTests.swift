import NIOHTTP1
import RPCServer
import Testing
@testable import XRPCGateway

@Suite struct GatewayAdmissionTests {
    let admission = GatewayAdmission(allowedUID: 1000)
    let owner = PeerCredentials(pid: 42, uid: 1000, gid: 1000)

    func head(_ headers: [(String, String)], version: HTTPVersion = .http1_1) -> HTTPRequestHead {
        HTTPRequestHead(version: version, method: .GET, uri: "/xrpc/app.bsky.actor.getProfile", headers: HTTPHeaders(headers))
    }

    @Test func theOwnersProgramIsAdmitted() {
        for host in ["localhost", "LOCALHOST", "localhost:80", "127.0.0.1", "127.0.0.1:9583", "[::1]", "[::1]:9583", "blueskyd"] {
            #expect(admission.refusal(of: head([("Host", host)]), peer: owner) == nil, "\(host)")
        }
    }

    @Test func otherUsersAndUnknownPeersAreRefused() {
        let other = PeerCredentials(pid: 7, uid: 1001, gid: 1001)
        #expect(admission.refusal(of: head([("Host", "localhost")]), peer: other) == .otherUser(uid: 1001))
        #expect(admission.refusal(of: head([("Host", "localhost")]), peer: nil) == .unknownPeer)
        #expect(GatewayRefusal.otherUser(uid: 1001).name == "PermissionDenied")
    }

    @Test("a client whose uid cannot be read is admitted only with a token that vouches for it, and never from a web page")
    func vouchedFor() {
        let vouching = GatewayAdmission(allowedUID: 1000, vouchedFor: { $0.headers.first(name: "authorization") == "Bearer ok" })
        #expect(vouching.refusal(of: head([("Host", "localhost"), ("Authorization", "Bearer ok")]), peer: nil) == nil)
        #expect(vouching.refusal(of: head([("Host", "localhost"), ("Authorization", "Bearer no")]), peer: nil) == .unknownPeer)
        #expect(vouching.refusal(of: head([("Host", "localhost"), ("Authorization", "Bearer ok"), ("Origin", "https://e.example")]), peer: nil)
                == .browser(header: "Origin"))
        // A known uid is what it is, token or not.
        #expect(vouching.refusal(of: head([("Host", "localhost"), ("Authorization", "Bearer ok")]),
                                 peer: PeerCredentials(pid: 7, uid: 1001, gid: 1001)) == .otherUser(uid: 1001))
    }

    @Test func aRequestFromAWebPageIsRefused() {
        let fromPage = admission.refusal(of: head([("Host", "localhost"), ("Origin", "https://evil.example")]), peer: owner)
        #expect(fromPage == .browser(header: "Origin"))
        let navigation = admission.refusal(of: head([("Host", "localhost"), ("Referer", "https://evil.example/")]), peer: owner)
        #expect(navigation == .browser(header: "Referer"))
        // "null" is what a sandboxed page sends: still a page.
        #expect(admission.refusal(of: head([("Host", "localhost"), ("Origin", "null")]), peer: owner) != nil)
        #expect(GatewayRefusal.browser(header: "Origin").response.status == .forbidden)
        #expect(GatewayRefusal.browser(header: "Origin").name == "BrowserRequestRefused")
    }

    @Test func aForeignHostIsRefused() {
        // DNS rebinding: a page's own name, now resolving to 127.0.0.1.
        for host in ["evil.example", "localhost.evil.example", "127.0.0.1.nip.io", "localhost:abc", "localhost:99999", ""] {
            #expect(admission.refusal(of: head([("Host", host)]), peer: owner) == .badHost(host), "\(host)")
        }
        #expect(admission.refusal(of: head([("Host", "localhost"), ("Host", "evil.example")]), peer: owner) != nil)
        #expect(admission.refusal(of: head([]), peer: owner) == .badHost(""))
        // HTTP/1.0 needs no Host.
        #expect(admission.refusal(of: head([], version: .http1_0), peer: owner) == nil)
    }

    @Test func onLoopbackTCPTheHostNamesTheGatewaysPort() {
        let tcp = GatewayAdmission(allowedUID: 1000, port: 9583)
        #expect(tcp.refusal(of: head([("Host", "127.0.0.1:9583")]), peer: owner) == nil)
        #expect(tcp.refusal(of: head([("Host", "localhost")]), peer: owner) == nil)
        #expect(tcp.refusal(of: head([("Host", "127.0.0.1:8080")]), peer: owner) == .badHost("127.0.0.1:8080"))
    }

    @Test("Host: blueskyd, a single label a search domain or a rebinding answer can carry a page's request to, only on Unix sockets")
    func singleLabelOnlyOnUnixSockets() {
        let tcp = GatewayAdmission(allowedUID: 1000, port: 9583)
        for host in ["blueskyd", "BLUESKYD", "blueskyd:9583"] {
            #expect(tcp.refusal(of: head([("Host", host)]), peer: owner) == .badHost(host), "\(host)")
            #expect(admission.refusal(of: head([("Host", host)]), peer: owner) == nil, "\(host)")
        }
    }
}
