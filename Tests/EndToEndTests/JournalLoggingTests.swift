import BlueskyTesting
import Foundation
import JSONRPC
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("Logging to the journal")
struct JournalLoggingTests {
    /// One journal entry in the native protocol: `NAME=value` lines.
    static func fields(of entry: String) -> [String: String] {
        var fields: [String: String] = [:]
        for line in entry.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            fields[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return fields
    }

    @Test("when JOURNAL_STREAM names its stderr, blueskyd sends structured entries with priorities to the journal socket")
    func entriesReachTheJournal() async throws {
        try #require(getuid() == 0 && ProcessInfo.processInfo.environment["BLUESKYD_HERMETIC"] == "1", """
            THIS TEST NEEDS ROOT INSIDE scripts/hermetic-run (make test): it mounts a tmpfs over /run/systemd in \
            the test's private mount namespace to stand in for journald. Journal output is NOT verified in this run.
            """)
        try #require(FileManager.default.fileExists(atPath: "/run/systemd"), "/run/systemd is needed as a mount point")
        // Only this namespace sees the tmpfs; the machine's journald is never touched.
        try #require(mount("tmpfs", "/run/systemd", "tmpfs", 0, "mode=0755") == 0,
                     "mount tmpfs on /run/systemd: \(String(cString: strerror(errno)))")
        defer { umount2("/run/systemd", Int32(MNT_DETACH)) }
        try FileManager.default.createDirectory(atPath: "/run/systemd/journal", withIntermediateDirectories: true)
        let journal = try NotifySocket(path: "/run/systemd/journal/socket")

        let directory = try TemporaryDirectory("blueskyd-journal")
        defer { directory.remove() }
        // What systemd does: stderr is the journal stream and JOURNAL_STREAM names it (device:inode).
        let stderrFile = directory.file("stderr")
        FileManager.default.createFile(atPath: stderrFile, contents: nil)
        var info = stat()
        try #require(stat(stderrFile, &info) == 0)
        let socket = directory.file("run/blueskyd.sock")
        let daemon = try LaunchedDaemon(
            directory: directory, socketPath: socket,
            arguments: ["--state-directory", directory.file("state"), "--socket", socket],
            environment: ["JOURNAL_STREAM": "\(info.st_dev):\(info.st_ino)"], logFile: stderrFile)
        defer { daemon.runner.terminate() }
        // "listening" is logged once the socket is bound: from then on calls are answered.
        try await journal.waitFor("'listening' in the journal") { $0.contains("MESSAGE=listening\n") }
        await #expect(throws: RPCError.self) {
            try await daemon.call("xrpc.call", ["nsid": "app.bsky.actor.getProfile", "account": "nobody.example"])
        }
        try await journal.waitFor("the failed call in the journal") { $0.contains("MESSAGE=xrpc call failed") }
        #expect(await daemon.stop() == 0)

        let entries = journal.messages.map(Self.fields)
        let started = try #require(entries.first { $0["MESSAGE"] == "blueskyd started" })
        #expect(started["PRIORITY"] == "6", "info is priority 6")
        #expect(started["SYSLOG_IDENTIFIER"] == "blueskyd")
        #expect(started["SOCKET"] == socket && started["SOCKETACTIVATED"] == "false", "metadata become fields: \(started)")
        let failed = try #require(entries.first { $0["MESSAGE"] == "xrpc call failed" })
        #expect(failed["PRIORITY"] == "5", "notice is priority 5")
        #expect(failed["NSID"] == "app.bsky.actor.getProfile" && failed["OUTCOME"] == "AccountNotFound", "\(failed)")
        #expect(entries.contains { $0["MESSAGE"] == "blueskyd stopped" })
        #expect(!daemon.log.contains("blueskyd started"), "nothing went to stderr as text: \(daemon.log)")
    }
}
