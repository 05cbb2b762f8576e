import Testing
import WebBasics

@Suite("URL origins")
struct URLOriginTests {
    @Test("scheme and host in lower case, the default port left out, other ports kept")
    func normalises() {
        #expect(URLOrigin(scheme: "HTTPS", host: "PDS.Example.COM", port: 443)?.string == "https://pds.example.com")
        #expect(URLOrigin(scheme: "http", host: "localhost", port: 80)?.string == "http://localhost")
        #expect(URLOrigin(scheme: "http", host: "localhost", port: 443)?.string == "http://localhost:443")
        #expect(URLOrigin(scheme: "https", host: "pds.example.com", port: nil)?.string == "https://pds.example.com")
        #expect(URLOrigin(scheme: "https", host: "pds.example.com", port: 8443)?.authority == "pds.example.com:8443")
        #expect(URLOrigin(scheme: "https", host: "pds.example.com", port: 443)?.port == nil)
    }

    @Test("an IPv6 literal is written in brackets whether or not it came with them")
    func ipv6() {
        #expect(URLOrigin(scheme: "http", host: "::1", port: 2583)?.string == "http://[::1]:2583")
        #expect(URLOrigin(scheme: "http", host: "[::1]", port: 2583)?.string == "http://[::1]:2583")
        #expect(URLOrigin(scheme: "https", host: "[FE80::1]", port: nil)?.host == "[fe80::1]")
    }

    @Test("only http and https, and only with a host")
    func refuses() {
        #expect(URLOrigin(scheme: "ftp", host: "example.com", port: nil) == nil)
        #expect(URLOrigin(scheme: "https", host: "", port: nil) == nil)
        #expect(URLOrigin.defaultPort(scheme: "HTTPS") == 443)
        #expect(URLOrigin.defaultPort(scheme: "http") == 80)
        #expect(URLOrigin.defaultPort(scheme: "httpx") == nil)
        #expect(URLOrigin.defaultPort(scheme: "wss") == nil)
    }
}
