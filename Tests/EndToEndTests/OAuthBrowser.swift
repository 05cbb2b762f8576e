import ATTestbed
import BlueskyHTTP
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

/// The user's browser, simulated: it opens the authorization URL (the testbed approves at once),
/// reads the 302's Location, and either follows it to the daemon's loopback listener or hands
/// it back for pasting.
final class OAuthBrowser: Sendable {
    let http: OutboundHTTP

    init(testbed: Testbed) throws {
        http = try OutboundHTTP(.init(policy: HTTPPolicy(allowInsecureLoopback: true), extraCAFile: testbed.caFile))
    }

    func shutdown() async { try? await http.shutdown() }

    /// The redirect the authorization server answers with.
    func approve(_ authorizationURL: String) async throws -> String {
        let response = try await http.send(OutboundRequest(url: try #require(URL(string: authorizationURL))))
        #expect(response.status == 302, "the authorization server redirects back: \(String(decoding: response.body, as: UTF8.self))")
        return try #require(response.header("Location"))
    }

    /// Follows the redirect to the daemon's listener; returns its page.
    func deliver(_ location: String) async throws -> (status: Int, text: String) {
        let response = try await http.send(OutboundRequest(url: try #require(URL(string: location))))
        return (response.status, String(decoding: response.body, as: UTF8.self))
    }
}

/// `bskyctl login` running in the background, with a stdin the test writes to (the paste) and
/// its output in files the test polls (the URL it prints).
final class InteractiveBskyctl: @unchecked Sendable {
    private let process = Process()
    private let stdin = Pipe()
    private let directory: String

    init(_ arguments: [String], socketPath: String, directory: String) throws {
        self.directory = directory + "/bskyctl-\(UUID().uuidString.prefix(6))"
        try FileManager.default.createDirectory(atPath: self.directory, withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: self.directory + "/out", contents: nil)
        FileManager.default.createFile(atPath: self.directory + "/err", contents: nil)
        process.executableURL = URL(fileURLWithPath: Binaries.path("bskyctl"))
        process.arguments = arguments + ["--socket", socketPath]
        var environment = ProcessInfo.processInfo.environment
        // No desktop: bskyctl prints the URL instead of running xdg-open.
        environment.removeValue(forKey: "DISPLAY")
        environment.removeValue(forKey: "WAYLAND_DISPLAY")
        process.environment = environment
        process.standardInput = stdin
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: self.directory + "/out"))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: self.directory + "/err"))
        try process.run()
    }

    deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

    var stdout: String { (try? String(contentsOfFile: directory + "/out", encoding: .utf8)) ?? "" }
    var stderr: String { (try? String(contentsOfFile: directory + "/err", encoding: .utf8)) ?? "" }
    var pid: Int32 { process.processIdentifier }

    /// The authorization URL bskyctl printed, once it has.
    func authorizationURL(timeout: Duration = .seconds(30)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let line = stderr.split(separator: "\n").first(where: { $0.trimmingCharacters(in: .whitespaces).hasPrefix("https://") }) {
                return line.trimmingCharacters(in: .whitespaces)
            }
            guard process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("bskyctl printed no URL: \(stderr)")
        throw CancellationError()
    }

    func paste(_ line: String) {
        stdin.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    func interrupt() { kill(process.processIdentifier, SIGINT) }

    /// The exit status.
    func wait(timeout: Duration = .seconds(60)) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        return process.isRunning ? nil : process.terminationStatus
    }
}

extension EndToEndFixture {
    /// A whole OAuth login through the daemon's RPC methods, the browser delivering the redirect.
    func oauthLogin(_ identifier: String, browser: OAuthBrowser, extra: [String: JSONValue] = [:]) async throws -> JSONValue {
        var params: [String: JSONValue] = ["identifier": .string(identifier)]
        params.merge(extra) { _, new in new }
        let started = try await daemon.call("accounts.oauth.begin", .object(params))
        let loginID = try #require(started["loginID"]?.stringValue)
        let location = try await browser.approve(try #require(started["authorizationURL"]?.stringValue))
        let redirectURI = try #require(started["redirectURI"]?.stringValue)
        #expect(location.hasPrefix(redirectURI + "?"), "the redirect goes to the daemon's listener")
        let page = try await browser.deliver(location)
        #expect(page.status == 200, "the browser is told it worked: \(page.text)")
        return try await daemon.call("accounts.oauth.wait", ["loginID": .string(loginID), "timeoutSeconds": 30])
    }

    /// Starts a login and has the browser approve it; returns the login id and the redirect,
    /// not delivered.
    func approvedOAuthLogin(_ identifier: String, browser: OAuthBrowser) async throws -> (loginID: String, location: String) {
        let started = try await daemon.call("accounts.oauth.begin", ["identifier": .string(identifier)])
        let loginID = try #require(started["loginID"]?.stringValue)
        return (loginID, try await browser.approve(try #require(started["authorizationURL"]?.stringValue)))
    }

    /// The RPC error `body` throws, or nil.
    func rpcErrorName(_ body: () async throws -> Void) async -> String? {
        do {
            try await body()
            return nil
        } catch let error as RPCError {
            return error.name
        } catch {
            return "\(error)"
        }
    }
}
