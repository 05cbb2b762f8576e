import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

/// Large bodies through the gateway are passed on as they arrive, never held whole.
@Suite("The XRPC gateway streams large bodies both ways")
struct GatewayStreamingTests {
    /// VmRSS and VmHWM (peak) of a process, in KiB.
    static func memory(pid: Int32) -> (rss: Int, peak: Int)? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        func field(_ name: String) -> Int? {
            status.split(separator: "\n").first { $0.hasPrefix(name + ":") }
                .flatMap { Int($0.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") }
        }
        guard let rss = field("VmRSS"), let peak = field("VmHWM") else { return nil }
        return (rss, peak)
    }

    @Test("a 100 MB blob up through the gateway and back down: the same bytes, and the daemon's peak memory grows by far less than the blob")
    func hundredMegabytesUpAndDown() async throws {
        try await EndToEndFixture.with(names: ["alice"], configureTestbed: { $0.maxRequestBodyBytes = 128 << 20 }) { fixture in
            try await fixture.loginAll()
            let alice = fixture.accounts[0]
            let socket = fixture.daemon.gatewaySocketPath
            let original = fixture.directory.file("blob.bin")
            let copy = fixture.directory.file("blob-back.bin")
            let made = try await CommandResult.run("/bin/sh", ["-c", "head -c 100000000 /dev/urandom > '\(original)'"])
            try #require(made.status == 0, "\(made.stderr)")
            let before = try #require(Self.memory(pid: fixture.daemon.pid))

            let upload = try await CommandResult.run("/usr/bin/curl", [
                "--silent", "--show-error", "--max-time", "120", "--unix-socket", socket,
                "-H", "Content-Type: image/png", "--data-binary", "@\(original)",
                "http://localhost/xrpc/com.atproto.repo.uploadBlob",
            ])
            let blob = try #require(upload.json?["blob"], "\(upload.stdout) \(upload.stderr)")
            #expect(blob["size"]?.intValue == 100_000_000)
            let cid = try #require(blob["ref"]?["$link"]?.stringValue)

            let download = try await CommandResult.run("/usr/bin/curl", [
                "--silent", "--show-error", "--max-time", "120", "--unix-socket", socket, "--output", copy,
                "--write-out", "%{http_code} %{content_type}",
                "http://localhost/xrpc/com.atproto.sync.getBlob?did=\(alice.did)&cid=\(cid)",
            ])
            #expect(download.stdout == "200 image/png", "\(download.stdout) \(download.stderr)")
            let sums = try await CommandResult.run("/usr/bin/sha256sum", [original, copy])
            let digests = sums.stdout.split(separator: "\n").map { $0.split(separator: " ").first.map(String.init) ?? "" }
            #expect(digests.count == 2 && digests[0] == digests[1], "the bytes came back unchanged: \(sums.stdout)")

            let after = try #require(Self.memory(pid: fixture.daemon.pid))
            // Held whole, either way would lift the peak by the blob's 95 MiB at least.
            #expect(after.peak < before.rss + 40 * 1024,
                    "peak \(after.peak / 1024) MiB after, RSS \(before.rss / 1024) MiB before (peak before \(before.peak / 1024) MiB)")
        }
    }
}
