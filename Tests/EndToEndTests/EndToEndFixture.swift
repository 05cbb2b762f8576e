import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

/// A testbed, a dnsmasq holding the accounts' `_atproto` TXT records, and a real blueskyd.
final class EndToEndFixture: @unchecked Sendable {
    let directory: TemporaryDirectory
    let testbed: Testbed
    let dnsmasq: Dnsmasq
    let accounts: [TestAccount]
    var daemon: DaemonProcess
    /// The user's browser for OAuth logins, trusting the testbed's CA.
    let browser: OAuthBrowser
    let logLevel: String
    /// Further blueskyd arguments, at every start.
    let daemonArguments: [String]

    /// `names`: accounts to create; the first resolves by DNS TXT, the others by HTTPS well-known.
    init(names: [String] = ["alice", "bob"], accessTokenLifetime: Duration? = nil, logLevel: String = "debug",
         daemonArguments: [String] = [], configureTestbed: (inout TestbedConfiguration) -> Void = { _ in },
         daemonConfigFile: ((Testbed) -> String)? = nil,
         configure: (inout AccountSpec) -> Void = { _ in }) async throws {
        try HermeticNetwork.require()
        self.logLevel = logLevel
        directory = try TemporaryDirectory("blueskyd-e2e")
        testbed = try await Testbed.startInHermeticNetwork(directory: directory.file("testbed")) { config in
            if let accessTokenLifetime { config.accessTokenLifetime = accessTokenLifetime }
            configureTestbed(&config)
        }
        // A blueskyd.toml that may name the testbed's hosts (known only now).
        if let daemonConfigFile {
            let path = directory.file("blueskyd.toml")
            try daemonConfigFile(testbed).write(toFile: path, atomically: true, encoding: .utf8)
            self.daemonArguments = daemonArguments + ["--config", path]
        } else {
            self.daemonArguments = daemonArguments
        }
        var created: [TestAccount] = []
        for (index, name) in names.enumerated() {
            var spec = AccountSpec(name: name)
            spec.publishWellKnown = index != 0
            configure(&spec)
            created.append(await testbed.createAccount(spec))
        }
        accounts = created
        dnsmasq = try await Dnsmasq.start(txtRecords: [(name: "_atproto.\(created[0].handle)", value: "did=\(created[0].did)")])
        daemon = try await DaemonProcess(directory: directory.path, testbed: testbed,
                                         extraArguments: ["--nameserver", dnsmasq.nameserver] + self.daemonArguments, logLevel: logLevel)
        // Last: its HTTP client must be shut down, which only tearDown does.
        browser = try OAuthBrowser(testbed: testbed)
    }

    /// A fixture made with these arguments (see `init`) for `body`, torn down (awaited) when
    /// `body` returns or throws.
    @discardableResult
    static func with<T>(names: [String] = ["alice", "bob"], accessTokenLifetime: Duration? = nil, logLevel: String = "debug",
                        daemonArguments: [String] = [], configureTestbed: (inout TestbedConfiguration) -> Void = { _ in },
                        daemonConfigFile: ((Testbed) -> String)? = nil,
                        configure: (inout AccountSpec) -> Void = { _ in },
                        _ body: (EndToEndFixture) async throws -> T) async throws -> T {
        let fixture = try await EndToEndFixture(names: names, accessTokenLifetime: accessTokenLifetime, logLevel: logLevel,
                                                daemonArguments: daemonArguments, configureTestbed: configureTestbed,
                                                daemonConfigFile: daemonConfigFile, configure: configure)
        return try await withTearDown { await fixture.tearDown() } run: { try await body(fixture) }
    }

    /// Stops everything; `with` calls it when its body ends.
    func tearDown() async {
        await browser.shutdown()
        await daemon.stop()
        dnsmasq.stop()
        try? await testbed.shutdown()
        directory.remove()
    }

    /// Restarts the daemon on the same state directory.
    func restartDaemon(crash: Bool = false) async throws {
        if crash { await daemon.crash() } else { await daemon.stop() }
        daemon = try await DaemonProcess(directory: directory.path, testbed: testbed,
                                         extraArguments: ["--nameserver", dnsmasq.nameserver] + daemonArguments, logLevel: logLevel)
    }

    /// Runs the real bskyctl against this daemon.
    func bskyctl(_ arguments: [String], stdin: String? = nil) async throws -> CommandResult {
        try await CommandResult.run(Binaries.path("bskyctl"), arguments + ["--socket", daemon.socketPath],
                                    stdin: stdin)
    }

    /// Logs every account in through bskyctl with its app password.
    func loginAll() async throws {
        for account in accounts {
            let login = try await bskyctl(["login", account.handle, "--app-password"], stdin: account.appPassword + "\n")
            try #require(login.status == 0, "login \(account.handle) failed: \(login.stderr)")
        }
    }

    /// The `accounts.list` entries, by handle.
    func listedAccounts() async throws -> [String: JSONValue] {
        let list = try await daemon.call("accounts.list")
        var byHandle: [String: JSONValue] = [:]
        for account in list["accounts"]?.arrayValue ?? [] {
            byHandle[account["handle"]?.stringValue ?? "?"] = account
        }
        return byHandle
    }
}

/// What a command printed and how it exited.
struct CommandResult: Sendable {
    var status: Int32
    var stdout: String
    var stderr: String

    var json: JSONValue? { try? JSONValue.parse(Array(stdout.utf8)) }

    /// Runs a command to its end (killed after two minutes), whatever its exit status.
    static func run(_ executable: String, _ arguments: [String], stdin: String? = nil) async throws -> CommandResult {
        let output = try await ProcessRunner.run(executable, arguments, input: stdin, timeout: .seconds(120), check: false)
        return CommandResult(status: output.status, stdout: output.standardOutput, stderr: output.standardError)
    }
}

extension EndToEndFixture {
    /// `bskyctl login <identifier>` as a user runs it on a machine without a desktop: bskyctl
    /// prints the URL, the browser approves, and its redirect reaches the daemon's listener.
    /// Returns bskyctl once it exited.
    @discardableResult
    func loginWithBskyctl(_ identifier: String, browser: OAuthBrowser) async throws -> InteractiveBskyctl {
        let login = try InteractiveBskyctl(["login", identifier], socketPath: daemon.socketPath, directory: directory.path)
        let page = try await browser.deliver(try await browser.approve(try await login.authorizationURL()))
        #expect(page.status == 200, "the browser is told it worked: \(page.text)")
        let status = await login.wait()
        try #require(status == 0, "bskyctl login \(identifier) succeeds: \(login.stderr)")
        return login
    }
}

/// Waits (polling) until `condition` holds; the test stops with `what` when it never does.
func waitUntil(_ what: String, timeout: Duration, _ condition: () async throws -> Bool) async throws {
    let held = try await eventually(timeout: timeout, condition)
    try #require(held, "timed out waiting until \(what)")
}
