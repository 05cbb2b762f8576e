import ATOAuth
import BlueskyHTTP
import BlueskyTesting
import DaemonHarness
import Foundation
import OAuth2Client
import Testing

/// The OAuth 2.0 client against an authorization server built with Authlib from PyPI (its
/// rules, not ours): discovery, the PKCE login, refresh rotation, a replay, revocation.
@Suite("OAuth 2.0 against Authlib's authorization server")
struct AuthlibServerTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("authlib_server.py").path
    static let redirect = "http://127.0.0.1:53682/callback"

    /// Starts the server; its issuer URL, and the process to stop.
    static func start() async throws -> (issuer: String, process: Process) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, redirect]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let line = try await offThePool {
            var bytes: [UInt8] = []
            while let byte = try output.fileHandleForReading.read(upToCount: 1)?.first, byte != UInt8(ascii: "\n") { bytes.append(byte) }
            return String(decoding: bytes, as: UTF8.self)
        }
        guard line.hasPrefix("port "), let port = Int(line.dropFirst(5)) else {
            process.terminate()
            Issue.record("the Authlib server did not start (make deps installs authlib and flask): \(line)")
            throw CancellationError()
        }
        return ("http://127.0.0.1:\(port)", process)
    }

    @Test("discovery, PKCE login, userinfo, refresh rotation, a replayed refresh token refused (invalid_grant), revocation")
    func loginAndRefresh() async throws {
        let (issuer, process) = try await Self.start()
        defer { process.terminate() }
        let http = try OutboundHTTP(.init(policy: HTTPPolicy(allowInsecureLoopback: true)))
        try await withTearDown { try? await http.shutdown() } run: {
            let metadata = try await ProviderDiscovery(http: http, timeout: .seconds(10), allowInsecureLoopback: true).discover(issuer: issuer)
            #expect(metadata.revocationEndpoint?.absoluteString == issuer + "/revoke")
            let client = RegisteredClient(clientID: "blueskyd")  // configured, as a [[provider]] would
            let login = AuthorizationCode(metadata: metadata, client: client, redirectURI: Self.redirect, scope: "profile offline_access")
            let approval = try await http.send(OutboundRequest(url: login.authorizationURL), timeout: .seconds(10))
            #expect(approval.status == 302, "\(String(decoding: approval.body, as: UTF8.self))")
            let code = try login.code(fromRedirect: try #require(approval.header("Location")))
            let tokens = OAuth2TokenClient(metadata: metadata, client: client, http: http, timeout: .seconds(10))
            let first = try await tokens.exchange(code: code, verifier: login.pkce.verifier, redirectURI: Self.redirect)
            let refresh = try #require(first.refreshToken, "Authlib issues a refresh token")
            #expect(first.accessExpiresAt != nil)
            let userinfo = try await http.send(OutboundRequest(url: try #require(metadata.userinfoEndpoint),
                                                               headers: [("Authorization", "Bearer " + first.accessToken)]), timeout: .seconds(10))
            #expect(userinfo.status == 200 && String(decoding: userinfo.body, as: UTF8.self).contains("Erin"))

            let second = try await tokens.refresh(refresh)
            #expect(second.refreshToken != nil && second.refreshToken != refresh)
            let replay = await #expect(throws: OAuth2ClientError.self) { try await tokens.refresh(refresh) }
            #expect(replay?.endsSession == true, "\(String(describing: replay))")
            #expect(try await tokens.revoke(try #require(second.refreshToken)))
            let afterRevoke = await #expect(throws: OAuth2ClientError.self) { try await tokens.refresh(try #require(second.refreshToken)) }
            #expect(afterRevoke?.endsSession == true)
        }
    }
}
