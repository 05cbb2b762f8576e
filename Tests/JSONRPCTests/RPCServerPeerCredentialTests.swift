import Foundation
import JSONRPC
import RPCServer
import Testing

@Suite("RPCServer peer credentials")
struct RPCServerPeerCredentialTests {
    @Test("a peer whose uid is not allowed gets one PermissionDenied line, then EOF")
    func refusesOtherUID() async throws {
        try await withServer(configuration: .init(allowedUID: 4242)) { server in
            let client = try await server.connect()
            let reply = try #require(try await client.readReply())
            #expect(reply["id"] == .null)
            #expect(reply["error"]?["code"]?.intValue == -32000)
            #expect(errorName(reply) == "PermissionDenied")
            #expect(try await client.readReply() == nil)

            let caller = try await server.connect()
            await #expect(throws: RPCClientError.permissionDenied(server.socketPath)) {
                try await caller.call("echo")
            }
        }
    }

    @Test("a process really running as another uid (nobody, via setpriv) is refused")
    func refusesRealOtherUser() async throws {
        // The refusal can only be tested if setpriv can actually become another user here.
        let identity = try await runProcess(
            "/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/id", "-u"])
        try #require(
            identity.status == 0 && identity.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "65534",
            "setpriv could not switch to uid 65534 (status \(identity.status), \(identity.stderr)): the peer-credential check was NOT tested against a real other user")

        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/rpc.sock"
        let server = RPCServer(
            socketPath: path, configuration: .init(allowedUID: 0), handler: TestHandler(), logger: quietLogger)
        let task = Task { try await server.run() }
        defer { task.cancel() }
        try await server.waitUntilListening()
        // Only for this test: let uid 65534 reach the socket, so that SO_PEERCRED is the only guard.
        #expect(chmod(directory.path, 0o777) == 0)
        #expect(chmod(path, 0o666) == 0)

        // Only read (socat -u, socket to stdout): the server answers the refusal as it accepts
        // and closes, so a request written at the same moment could meet a closed socket (EPIPE)
        // and end socat before it read the refusal, as a loaded run once saw.
        let output = try await runProcess(
            "/usr/bin/setpriv",
            ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/socat", "-u", "-t", "30", "UNIX-CONNECT:\(path)", "-"])
        #expect(output.status == 0, "socat failed: \(output.stderr)")
        let lines = output.stdout.split(separator: "\n")
        #expect(lines.count == 1, "expected exactly the refusal, got: \(output.stdout)")
        let reply = try JSONValue.parse(Array((lines.first ?? "").utf8))
        #expect(errorName(reply) == "PermissionDenied")
        #expect(reply["id"] == .null)

        task.cancel()
        try await task.value
    }
}
