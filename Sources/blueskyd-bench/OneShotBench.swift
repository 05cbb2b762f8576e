import DaemonHarness
import Foundation

/// Section 16: one call from a program started for it, as a shell script makes it: `bskyctl
/// proxy` against the Python atproto SDK pointed at blueskyd's gateway (the same call, the
/// same daemon), each started afresh, taking turns. What a one-shot call costs is mostly the
/// program's start: bskyctl's must stay a small part of an SDK's (target: 20 times faster).
enum OneShotBench {
    static let section = "oneshot"
    static let runs = 15
    static let targetRatio = 20.0

    static let sdkScript = """
        import sys, httpx
        from atproto import Client
        from atproto_client.request import Request
        client = Client(base_url="http://localhost", request=Request(transport=httpx.HTTPTransport(uds=sys.argv[1])))
        print(client.app.bsky.actor.get_profile({"actor": sys.argv[2]}).did)
        """

    static func measure(daemon: DaemonProcess, did: String) async throws -> OneShotResult {
        let bskyctl = [Binaries.path("bskyctl"), "proxy", benchNSID, "--param", "actor=\(did)", "--socket", daemon.socketPath]
        let sdk = ["/usr/bin/env", "python3", "-c", sdkScript, daemon.gatewaySocketPath, did]
        var result = OneShotResult(runs: runs)
        for run in 0..<runs {
            for isControl in run % 2 == 0 ? [true, false] : [false, true] {
                let seconds = try await timed(isControl ? bskyctl : sdk, expecting: did)
                if isControl { result.bskyctlMilliseconds.append(seconds * 1000) } else { result.sdkMilliseconds.append(seconds * 1000) }
            }
        }
        return result
    }

    /// Wall time from starting `command` to its exit; it must exit 0 and print `expecting`.
    private static func timed(_ command: [String], expecting: String) async throws -> Double {
        try await offThePool {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: command[0])
            process.arguments = Array(command.dropFirst())
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            let start = ContinuousClock.now
            try process.run()
            let printed = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            let elapsed = (ContinuousClock.now - start).inSeconds
            guard process.terminationStatus == 0, String(decoding: printed, as: UTF8.self).contains(expecting) else {
                throw BenchError.unexpectedReply("\(command[0]) exited with \(process.terminationStatus)")
            }
            return elapsed
        }
    }
}

struct OneShotResult: Codable, Sendable {
    var runs: Int
    var bskyctlMilliseconds: [Double] = []
    var sdkMilliseconds: [Double] = []

    var bskyctlMedian: Double { Statistics.median(bskyctlMilliseconds) ?? 0 }
    var sdkMedian: Double { Statistics.median(sdkMilliseconds) ?? 0 }
    /// How many times faster bskyctl is, by the medians.
    var ratio: Double { bskyctlMedian > 0 ? sdkMedian / bskyctlMedian : 0 }
    var meetsTarget: Bool { ratio >= OneShotBench.targetRatio }
}
