import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Synchronization
import Testing

@Suite("Stopping and logging: SIGTERM in a refresh storm, secrets kept out of the log")
struct GracefulStopTests {
    @Test("SIGTERM in a refresh storm: calls finish or get ShuttingDown, no refresh is cut off, no refresh token is lost or replayed")
    func sigtermDuringRefreshStorm() async throws {
        try await EndToEndFixture.with(names: ["alice", "bob", "carol", "dave"], accessTokenLifetime: .seconds(2)) { fixture in
            try await fixture.loginAll()
            let testbed = fixture.testbed
            let refreshes = { fixture.accounts.map { testbed.stats(did: $0.did).refreshes }.reduce(0, +) }

            // The storm: eight connections asking for refreshes and making calls, on top of the
            // scheduler's own refreshes of two-second tokens.
            let before = refreshes()
            let dids = fixture.accounts.map(\.did)
            let socket = fixture.daemon.socketPath
            let storm = Task { await Storm.run(socketPath: socket, dids: dids, connections: 8) }
            try #require(await eventually(timeout: .seconds(30)) { refreshes() >= before + 12 }, "the storm is refreshing")

            let status = await fixture.daemon.stop()
            let outcomes = await storm.value
            #expect(status == 0, "a clean stop: \(fixture.daemon.log.suffix(2000))")
            let log = fixture.daemon.log
            #expect(log.contains("blueskyd stopped"))
            #expect(!log.contains("grace period over") && !log.contains("abandoning"), "nothing had to be cut off")
            #expect(!log.contains("closing the account store failed"), "the store closed cleanly")
            #expect(outcomes.replies["ok", default: 0] > 0, "the storm got answers: \(outcomes)")
            let unexpected = outcomes.replies.keys.filter { $0 != "ok" && $0 != "ShuttingDown" }
            #expect(unexpected.isEmpty, "every call finished or was told ShuttingDown: \(outcomes)")

            for account in fixture.accounts {
                let stats = testbed.stats(did: account.did)
                #expect(stats.refreshTokenReuses == 0, "\(account.handle): no refresh token presented twice")
                #expect(stats.rejectedRefreshes == 0, "\(account.handle): no refresh refused")
            }

            // After a restart every account still works, and none had a refresh in flight at the stop.
            try await fixture.restartDaemon()
            #expect(!fixture.daemon.log.contains("a refresh was in flight when blueskyd stopped"), "\(fixture.daemon.log)")
            for account in fixture.accounts {
                let refreshed = try await fixture.bskyctl(["refresh", account.did])
                #expect(refreshed.status == 0, "\(account.handle) refreshes after the restart: \(refreshed.stderr)")
                let profile = try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--param", "actor=\(account.did)",
                                                         "--account", account.did])
                #expect(profile.status == 0, "\(account.handle) calls after the restart: \(profile.stderr)")
                let stats = testbed.stats(did: account.did)
                #expect(stats.refreshTokenReuses == 0 && stats.rejectedRefreshes == 0, "\(account.handle): \(stats)")
            }
        }
    }

    @Test("at log level trace no token, password or store key reaches the log: login, calls, refreshes, expiry, restart, logout")
    func noSecretsInTheLog() async throws {
        // Passwords no log line could hold by chance (the testbed's default is "password").
        try await EndToEndFixture.with(accessTokenLifetime: .seconds(3), logLevel: "trace", configure: {
            $0.password = "main-secret-\(UUID().uuidString)"
        }) { fixture in
            let (alice, bob) = (fixture.accounts[0], fixture.accounts[1])
            let wrong = try await fixture.bskyctl(["login", alice.handle, "--app-password"], stdin: "wrong-\(alice.appPassword)\n")
            #expect(wrong.status == 1, "a wrong password is refused: \(wrong.stderr)")
            try await fixture.loginAll()
            for account in [alice, bob] {
                #expect(try await fixture.bskyctl(["proxy", "app.bsky.feed.getTimeline", "--account", account.did]).status == 0)
                #expect(try await fixture.bskyctl(["refresh", account.did]).status == 0)
            }
            #expect(await eventually { fixture.testbed.stats(did: bob.did).refreshes >= 3 }, "bob's tokens are refreshed on schedule")
            fixture.testbed.advanceClock(by: .seconds(4))
            #expect(try await fixture.bskyctl(["proxy", "app.bsky.actor.getProfile", "--param", "actor=\(alice.did)"]).status == 0)
            try await fixture.restartDaemon()
            #expect(try await fixture.bskyctl(["logout", bob.handle]).status == 0)
            await fixture.daemon.stop()

            let directory = fixture.directory.path
            let logs = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".log") }
            try #require(logs.count == 2, "one log per daemon run: \(logs)")
            let text = try logs.map { try String(contentsOfFile: directory + "/" + $0, encoding: .utf8) }.joined()
            #expect(text.contains("nsid=app.bsky.feed.getTimeline") && text.contains("outcome=refreshed"),
                    "the log is the verbose one, with calls and refreshes in it")
            #expect(!text.contains("eyJ"), "no JWT (access or refresh token)")
            #expect(!text.contains(LogRedactionMarker.text), "no code path even tried to log a token")
            for account in [alice, bob] {
                #expect(!text.contains(account.appPassword) && !text.contains(account.password), "no password of \(account.handle)")
            }
            let key = try #require(FileManager.default.contents(atPath: fixture.daemon.stateDirectory + "/store.key"))
            for form in [key.base64EncodedString(), key.map { String(format: "%02x", $0) }.joined(),
                         String(decoding: key, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)] where form.count >= 16 {
                #expect(!text.contains(form), "no store key")
            }
        }
    }
}

/// What the daemon's log redaction writes in place of a token.
enum LogRedactionMarker {
    static let text = "[redacted]"
}

/// Clients that keep refreshing and calling until their connection ends.
enum Storm {
    struct Outcomes: Sendable, CustomStringConvertible {
        /// Reply kinds: "ok", or the RPC error's name, or "status N" for a failed XRPC call.
        var replies: [String: Int] = [:]
        var description: String { "\(replies)" }
    }

    static func run(socketPath: String, dids: [String], connections: Int) async -> Outcomes {
        await withTaskGroup(of: [String: Int].self) { group in
            for connection in 0..<connections {
                group.addTask {
                    (try? await offThePool { worker(socketPath, dids, connection) }) ?? [:]
                }
            }
            var all = Outcomes()
            for await replies in group { all.replies.merge(replies, uniquingKeysWith: +) }
            return all
        }
    }

    /// Alternates accounts.refresh and xrpc.call until the daemon closes the connection.
    private static func worker(_ socketPath: String, _ dids: [String], _ index: Int) -> [String: Int] {
        var replies: [String: Int] = [:]
        guard let client = try? RPCClientConnection(socketPath: socketPath, timeout: .seconds(60)) else {
            return ["connect failed": 1]
        }
        defer { client.close() }
        for n in 0... {
            let did = JSONValue.string(dids[(index + n) % dids.count])
            let call: Result<JSONValue, RPCError>
            do {
                call = n % 2 == 0
                    ? try client.call(method: "accounts.refresh", params: ["account": did])
                    : try client.call(method: "xrpc.call", params: ["nsid": "app.bsky.actor.getProfile", "account": did,
                                                                    "params": ["actor": did]])
            } catch {
                return replies  // the daemon closed the connection: the stop
            }
            let kind: String = switch call {
            case .success(let result): result["status"].map { $0 == 200 ? "ok" : "status \($0)" } ?? "ok"
            case .failure(let error): error.name
            }
            replies[kind, default: 0] += 1
        }
        return replies
    }
}
