import DaemonHarness
import JSONRPC
import NIOCore

/// A direct endpoint that can be pinned to one event loop, so the latency section's direct
/// calls pay no thread hop the daemon connection (bound to its loop) does not.
protocol DirectBenchEndpoint: BenchEndpoint {
    func pinned(to loop: any EventLoop) -> Self
}

/// The two side-by-side measurements of one kind of proxied call (app password: sections 1
/// and 2; OAuth: 5 and 6): the same call straight to the PDS and through blueskyd, in
/// alternating rounds (throughput) or blocks (latency), so drift weighs on both sides alike.
struct SideBySide {
    let options: BenchOptions
    let progress: ProgressLog
    /// Put before the section names in progress lines: "" (app password) or "oauth-".
    let prefix: String
    let daemon: DaemonProcess
    /// One `xrpc.call` request line, newline-terminated, sent on every daemon call.
    let requestLine: ByteBuffer
    let group: any EventLoopGroup
    /// The most latency blueskyd may add at p50, microseconds: 100 for a bearer token, 150
    /// where each call signs a DPoP proof.
    var latencyTarget = LatencyResult.appPasswordTarget

    func throughput(direct: any DirectBenchEndpoint) async throws -> ThroughputResult {
        var daemonEndpoints: [DaemonEndpoint] = []
        for _ in 0..<options.connections {
            daemonEndpoints.append(try await DaemonEndpoint.connect(
                socketPath: daemon.socketPath, requestLine: requestLine, group: group))
        }
        let directSide: [any BenchEndpoint] = Array(repeating: direct, count: options.connections)
        let daemonSide: [any BenchEndpoint] = daemonEndpoints
        let loop = group.next()

        progress.say("\(prefix)throughput: warming up both sides (\(format(options.warmupSeconds, 1)) s each)")
        let warmDirect = await ClosedLoopLoad.measure(endpoints: directSide, seconds: 0.1, rampSeconds: options.warmupSeconds, loop: loop)
        let warmDaemon = await ClosedLoopLoad.measure(endpoints: daemonSide, seconds: 0.1, rampSeconds: options.warmupSeconds, loop: loop)
        var directRounds: [Double] = []
        var daemonRounds: [Double] = []
        var directFailures = warmDirect.failed
        var daemonFailures = warmDaemon.failed
        var firstError = warmDirect.firstError ?? warmDaemon.firstError
        for round in 0..<options.rounds {
            // ABBA order, so a drift over the run weighs on both sides alike.
            let order = round % 2 == 0 ? [true, false] : [false, true]
            for isDirect in order {
                let measured = await ClosedLoopLoad.measure(
                    endpoints: isDirect ? directSide : daemonSide, seconds: options.roundSeconds, rampSeconds: 0.3, loop: loop)
                if isDirect {
                    directRounds.append(measured.callsPerSecond)
                    directFailures += measured.failed
                } else {
                    daemonRounds.append(measured.callsPerSecond)
                    daemonFailures += measured.failed
                }
                firstError = firstError ?? measured.firstError
                progress.say("\(prefix)throughput round \(round + 1)/\(options.rounds) \(isDirect ? "direct" : "daemon"): "
                    + "\(format(measured.callsPerSecond, 0)) calls/s")
            }
        }
        let directMedian = Statistics.median(directRounds) ?? 0
        let daemonMedian = Statistics.median(daemonRounds) ?? 0
        let result = ThroughputResult(
            nsid: benchNSID, connections: options.connections, inFlightPerConnection: 1,
            roundSeconds: options.roundSeconds, directRounds: directRounds, daemonRounds: daemonRounds,
            directMedian: directMedian, daemonMedian: daemonMedian,
            ratio: directMedian > 0 ? daemonMedian / directMedian : 0,
            directFailures: directFailures, daemonFailures: daemonFailures, firstError: firstError,
            daemonRSSAfterLoadKiB: ProcessMemory.read(pid: daemon.pid)?.rssKiB)
        for endpoint in daemonEndpoints { await endpoint.close() }
        return result
    }

    func latency(direct unpinned: any DirectBenchEndpoint) async throws -> LatencyResult {
        // Both sides on one event loop, so neither pays a thread hop the other does not.
        let loop = group.next()
        let direct = unpinned.pinned(to: loop)
        // AsyncHTTPClient serves a request bound to a loop its pool has no connection on with a
        // one-off "overflow" connection: a TLS handshake per call. Concurrent unbound calls
        // first give the pool connections on every loop (the throughput section, when it ran
        // before, left them there already).
        _ = await ClosedLoopLoad.measure(
            endpoints: Array(repeating: unpinned, count: options.connections), seconds: 0.1, rampSeconds: 0.2, loop: loop)
        let daemonEndpoint = try await DaemonEndpoint.connect(
            socketPath: daemon.socketPath, requestLine: requestLine, group: loop)

        progress.say("\(prefix)latency: \(options.latencySamples) sequential calls per side")
        let warmup = min(200, options.latencySamples)
        _ = try await SequentialSampler.sample(direct, count: warmup, loop: loop)
        _ = try await SequentialSampler.sample(daemonEndpoint, count: warmup, loop: loop)
        var directSamples: [Double] = []
        var daemonSamples: [Double] = []
        var failures = 0
        var block = 0
        while directSamples.count < options.latencySamples {
            let size = min(options.latencyBlock, options.latencySamples - directSamples.count)
            let order = block % 2 == 0 ? [true, false] : [false, true]
            for isDirect in order {
                let endpoint: any BenchEndpoint = isDirect ? direct : daemonEndpoint
                let samples = try await SequentialSampler.sample(endpoint, count: size, loop: loop)
                failures += samples.failures
                if isDirect { directSamples += samples.microseconds } else { daemonSamples += samples.microseconds }
            }
            block += 1
        }
        await daemonEndpoint.close()
        guard let directSummary = LatencySummary(directSamples), let daemonSummary = LatencySummary(daemonSamples) else {
            throw BenchError.unexpectedReply("no latency samples")
        }
        return LatencyResult(
            nsid: benchNSID, samplesPerSide: directSamples.count, blockSize: options.latencyBlock,
            direct: directSummary, daemon: daemonSummary,
            addedP50: daemonSummary.p50 - directSummary.p50, addedP99: daemonSummary.p99 - directSummary.p99,
            failures: failures, targetAddedP50: latencyTarget)
    }
}

/// The `xrpc.call` every daemon-side call sends: `benchNSID` for `did`, about `did`.
enum BenchRequest {
    static func params(did: String) -> JSONValue {
        ["nsid": .string(benchNSID), "account": .string(did), "params": ["actor": .string(did)]]
    }

    /// The request line, newline-terminated.
    static func line(did: String) -> ByteBuffer {
        let request: JSONValue = ["jsonrpc": "2.0", "id": 1, "method": "xrpc.call", "params": params(did: did)]
        var line = ByteBuffer(bytes: request.encoded())
        line.writeInteger(UInt8(ascii: "\n"))
        return line
    }
}
