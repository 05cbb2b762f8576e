import BlueskyTesting
import Foundation
import JSONRPC
import Testing

/// blueskyd against an OAuth 2.0 server nobody here wrote: Authlib's (PyPI), a public client
/// registered by hand with a fixed loopback redirect, rotating refresh tokens.
@Suite("blueskyd and Authlib's authorization server")
struct OAuth2AuthlibTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("OAuth2ClientTests/authlib_server.py").path

    /// A free loopback port, for the redirect URI the client is registered with.
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    @Test("login through a [[provider]], refreshes that rotate the token (each spent once), calls with the newest, logout revoking")
    func loginRefreshLogout() async throws {
        let redirect = "http://127.0.0.1:\(try Self.freePort())/callback"
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        server.arguments = ["python3", Self.script, redirect]
        let output = Pipe()
        server.standardOutput = output
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer { server.terminate() }
        let line = try await offThePool {
            var bytes: [UInt8] = []
            while let byte = try output.fileHandleForReading.read(upToCount: 1)?.first, byte != UInt8(ascii: "\n") { bytes.append(byte) }
            return String(decoding: bytes, as: UTF8.self)
        }
        try #require(line.hasPrefix("port "), "the Authlib server did not start (make deps installs authlib and flask): \(line)")
        let issuer = "http://127.0.0.1:" + line.dropFirst(5)
        try await EndToEndFixture.with(names: ["alice"], daemonConfigFile: { _ in
            """
            allow_insecure_loopback = true
            [[provider]]
            name = "authlib"
            issuer = "\(issuer)"
            client_id = "blueskyd"
            redirect_uri = "\(redirect)"
            scope = "profile offline_access"
            """
        }) { fixture in
            let account = try await fixture.oauthLogin("authlib", browser: fixture.browser)["account"] ?? .null
            #expect(account["auth"] == "oauth2" && account["did"]?.stringValue == issuer + "#user-1", "\(account)")
            #expect(account["profile"]?["displayName"] == "Erin", "read from its userinfo")
            let id = try #require(account["id"]?.stringValue)
            for _ in 0..<3 {
                _ = try await fixture.daemon.call("accounts.refresh", ["account": .string(id), "force": true])
                let me = try await fixture.daemon.call("http.call", ["account": .string(id), "path": "/userinfo"])
                #expect(me["status"] == 200 && me["body"]?["sub"] == "user-1", "the rotated token works: \(me)")
            }
            let listed = try await fixture.daemon.call("accounts.list")["accounts"]?.arrayValue?.first { $0["id"]?.stringValue == id }
            #expect(listed?["state"] == "active", "no refresh was refused: \(String(describing: listed))")
            let removed = try await fixture.daemon.call("accounts.remove", ["account": .string(id)])
            #expect(removed["serverSessionEnded"] == true, "Authlib took the revocation: \(removed)")
        }
    }
}
