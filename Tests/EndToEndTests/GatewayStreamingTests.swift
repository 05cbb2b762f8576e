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
            // Held whole, either way would lift the peak by the blob's 95 MiB at least. Each side is
            // held a few chunks at a time: the peak rose by 2 to 4 MiB in six runs. Before the
            // upload waited for its connection to take each chunk, a fast client and a busy loop
            // lifted it by 13 to 93 MiB.
            #expect(after.peak < before.rss + 16 * 1024,
                    "peak \(after.peak / 1024) MiB after, RSS \(before.rss / 1024) MiB before (peak before \(before.peak / 1024) MiB)")
        }
    }

    @Test("a PDS that stalls after the head: an error answer read to classify it, and a streamed answer, each end within the deadline")
    func stalledAnswers() async throws {
        try await EndToEndFixture.with(names: ["alice"], daemonConfigFile: { _ in "upstream_timeout_seconds = 3\n" }) { fixture in
            try await fixture.loginAll()
            let (alice, testbed) = (fixture.accounts[0], fixture.testbed)
            let socket = fixture.daemon.gatewaySocketPath
            let upload = try await GatewayTests.curl(socket, "/xrpc/com.atproto.repo.uploadBlob", [
                "-H", "Content-Type: image/png", "--data-binary", String(repeating: "x", count: 4096),
            ])
            let cid = try #require(upload.json?["blob"]?["ref"]?["$link"]?.stringValue, "\(upload.body)")
            let target = AnswerTarget.xrpc("com.atproto.sync.getBlob")

            // 400 BlobNotFound, its head and half its body, then silence for a minute.
            testbed.shapeAnswers(at: target, .stallAfterHalfBody(.seconds(60)), count: 1)
            var started = ContinuousClock.now
            let refused = try await GatewayTests.curl(socket, "/xrpc/com.atproto.sync.getBlob?did=\(alice.did)&cid=bafkreinone")
            #expect(ContinuousClock.now - started < .seconds(10), "given up within the 3 s deadline, not after the stall")
            #expect(refused.status == 502 && refused.error == "UpstreamUnavailable", "\(refused.status) \(refused.body)")

            // The blob itself, passed on as it comes: cut off when the rest does not come.
            testbed.shapeAnswers(at: target, .stallAfterHalfBody(.seconds(60)), count: 1)
            started = ContinuousClock.now
            let cut = try await GatewayTests.curl(socket, "/xrpc/com.atproto.sync.getBlob?did=\(alice.did)&cid=\(cid)")
            #expect(ContinuousClock.now - started < .seconds(10))
            #expect(cut.status == 200 && cut.body.count < 4096, "the head came, then the answer ended early: \(cut.body.count) bytes")

            // Nothing else is held up: the next call goes through.
            let next = try await GatewayTests.curl(socket, "/xrpc/com.atproto.sync.getBlob?did=\(alice.did)&cid=\(cid)")
            #expect(next.status == 200 && next.body.count == 4096)
        }
    }
}

