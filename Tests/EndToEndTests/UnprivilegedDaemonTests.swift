import ATTestbed
import BlueskyTesting
import DaemonHarness
import Foundation
import JSONRPC
import Testing

/// blueskyd as its users run it: an ordinary uid with no capabilities. (The other suites run it
/// as root, where a socket option only root may set passed unnoticed and every call of an
/// ordinary user's daemon failed.)
@Suite("blueskyd as an ordinary user")
struct UnprivilegedDaemonTests {
    @Test("a daemon run as nobody, with no capabilities, logs in and proxies calls on both fronts")
    func proxiesAsNobody() async throws {
        try #require(getuid() == 0, "this test starts blueskyd as another user; run it as root (make test does)")
        try HermeticNetwork.require()
        let directory = try TemporaryDirectory("blueskyd-nobody")
        let testbed = try await Testbed.startInHermeticNetwork(directory: directory.file("testbed"))
        let account = await testbed.createAccount(AccountSpec(name: "alice"))
        let dnsmasq = try await Dnsmasq.start(txtRecords: [(name: "_atproto.\(account.handle)", value: "did=\(account.did)")])
        // nobody reads the testbed's CA; the daemon's own directories are handed to it.
        chmod(directory.path, 0o755)
        _ = try await CommandResult.run("/usr/bin/chmod", ["-R", "a+rX", directory.file("testbed")])
        try FileManager.default.createDirectory(atPath: directory.file("home"), withIntermediateDirectories: true)
        let daemon = try await DaemonProcess(directory: directory.file("home"), testbed: testbed,
                                             extraArguments: ["--nameserver", dnsmasq.nameserver], asUser: (65534, 65534))
        try await withTearDown {
            await daemon.stop()
            dnsmasq.stop()
            try? await testbed.shutdown()
            directory.remove()
        } run: {
            func asNobody(_ arguments: [String], stdin: String? = nil) async throws -> CommandResult {
                try await CommandResult.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--",
                                                                 Binaries.path("bskyctl"), "--socket", daemon.socketPath] + arguments,
                                            stdin: stdin)
            }
            let login = try await asNobody(["login", account.handle, "--app-password"], stdin: account.appPassword + "\n")
            #expect(login.status == 0, "\(login.stderr)")
            let profile = try await asNobody(["proxy", "app.bsky.actor.getProfile", "--param", "actor=\(account.did)"])
            #expect(profile.status == 0 && profile.stdout.contains(account.did), "\(profile.stdout) \(profile.stderr)")
            let gateway = try await CommandResult.run("/usr/bin/setpriv", [
                "--reuid=65534", "--regid=65534", "--clear-groups", "--", "/usr/bin/curl", "--silent", "--unix-socket",
                daemon.gatewaySocketPath, "-w", "\n%{http_code}", "http://localhost/xrpc/com.atproto.server.getSession"])
            #expect(gateway.stdout.hasSuffix("\n200") && gateway.stdout.contains(account.did), "\(gateway.stdout) \(gateway.stderr)")
        }
    }
}
