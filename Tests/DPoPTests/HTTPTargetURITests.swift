import DPoP
import Testing

@Suite("htu normalisation (RFC 9449 §4.2)")
struct HTTPTargetURITests {
    @Test("scheme and host lowercased, default port dropped, query and fragment removed, path kept", arguments: [
        ("https://PDS.Example.COM/xrpc/app.bsky.feed.getTimeline?limit=50#top", "https://pds.example.com/xrpc/app.bsky.feed.getTimeline"),
        ("HTTPS://pds.example.com/oauth/token", "https://pds.example.com/oauth/token"),
        ("https://pds.example.com:443/oauth/par", "https://pds.example.com/oauth/par"),
        ("https://pds.example.com:8443/oauth/par", "https://pds.example.com:8443/oauth/par"),
        ("http://127.0.0.1:80/xrpc/a.b.c", "http://127.0.0.1/xrpc/a.b.c"),
        ("http://127.0.0.1:2583/xrpc/a.b.c?x=1", "http://127.0.0.1:2583/xrpc/a.b.c"),
        ("http://localhost:443/x", "http://localhost:443/x"),
        ("https://pds.example.com", "https://pds.example.com/"),
        ("https://pds.example.com?x=1", "https://pds.example.com/"),
        ("https://pds.example.com#frag", "https://pds.example.com/"),
        ("https://user:secret@pds.example.com/x", "https://pds.example.com/x"),
        ("https://[::1]:8443/x", "https://[::1]:8443/x"),
        ("https://[::1]:443/x", "https://[::1]/x"),
        ("https://[::1]/x", "https://[::1]/x"),
        ("https://pds.example.com/XRPC/Case%2FKept", "https://pds.example.com/XRPC/Case%2FKept"),
        ("https://pds.example.com:0443/x", "https://pds.example.com/x"),
    ])
    func normalises(input: String, expected: String) throws {
        #expect(try HTTPTargetURI(input).string == expected)
    }

    @Test("the origin is scheme, host and non-default port")
    func origin() throws {
        #expect(try HTTPTargetURI("https://PDS.example.com:443/xrpc/x?y").origin == "https://pds.example.com")
        #expect(try HTTPTargetURI("http://127.0.0.1:2583/").origin == "http://127.0.0.1:2583")
    }

    @Test("anything but an absolute http(s) URL with a host is refused", arguments: [
        "ftp://pds.example.com/x", "/xrpc/a.b.c", "https:///x", "https://pds.example.com:99999/",
        "https://pds.example.com:abc/", "https://pds.example.com:+443/", "pds.example.com/x", "https:/pds.example.com/x", "",
    ])
    func refuses(input: String) {
        #expect(throws: DPoPError.invalidTargetURI(input)) { try HTTPTargetURI(input) }
    }

    @Test("the error message leaves the query out")
    func errorWithoutQuery() {
        let error = DPoPError.invalidTargetURI("ftp://h/x?token=secret")
        #expect(!error.description.contains("secret"))
        #expect(error.description.contains("ftp://h/x"))
    }
}
