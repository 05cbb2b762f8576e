import Foundation
import DaemonHarness
import JSONRPC
import NIOCore

/// A direct endpoint that can be pinned to one event loop, so the latency section's direct
/// calls pay no thread hop the daemon connection (bound to its loop) does not.
protocol DirectBenchEndpoint: BenchEndpoint {
    func pinned(to loop: any EventLoop) -> Self
}

/// The side-by-side measurements of one kind of proxied call (app password: sections 1 and 2;
/// OAuth: 5 and 6): the same call straight to the PDS, through blueskyd's JSON-RPC socket and
/// through its XRPC gateway, in rotating rounds (throughput) or blocks (latency), so drift
/// weighs on every side alike.
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

    /// The account the gateway side calls for; nil leaves the gateway out.
    var gatewayDID: String?
    /// What the report names the call by.
    var callName = benchNSID
    /// The gateway request's target instead of the XRPC call for `gatewayDID` (an OAuth 2.0
    /// account's `/http/<account>/<path>`).
    var gatewayURI: String?

    private func gatewayEndpoint(group: any EventLoopGroup) async throws -> GatewayEndpoint? {
        if let uri = gatewayURI { return try await GatewayEndpoint.connect(socketPath: daemon.gatewaySocketPath, uri: uri, group: group) }
        guard let did = gatewayDID else { return nil }
        return try await GatewayEndpoint.connect(socketPath: daemon.gatewaySocketPath, did: did, group: group)
    }

    func throughput(direct: any DirectBenchEndpoint) async throws -> ThroughputResult {
        let directSide: [any BenchEndpoint] = Array(repeating: direct, count: options.connections)
        var daemonEndpoints: [DaemonEndpoint] = []
        for _ in 0..<options.connections {
            daemonEndpoints.append(try await DaemonEndpoint.connect(
                socketPath: daemon.socketPath, requestLine: requestLine, group: group))
        }
        // One pair at a time, as for latency: the JSON-RPC socket against direct calls, then the
        // gateway against direct calls of its own (three sides in one rotation lowered the
        // JSON-RPC side's ratio by a few hundredths).
        let first = await pair(directSide, daemonEndpoints, name: "daemon")
        for endpoint in daemonEndpoints { await endpoint.close() }
        let directMedian = Statistics.median(first.direct) ?? 0
        let daemonMedian = Statistics.median(first.other) ?? 0
        var result = ThroughputResult(
            nsid: callName, connections: options.connections, inFlightPerConnection: 1,
            roundSeconds: options.roundSeconds, directRounds: first.direct, daemonRounds: first.other,
            directMedian: directMedian, daemonMedian: daemonMedian,
            ratio: directMedian > 0 ? daemonMedian / directMedian : 0,
            directFailures: first.directFailures, daemonFailures: first.otherFailures, firstError: first.firstError,
            daemonRSSAfterLoadKiB: ProcessMemory.read(pid: daemon.pid)?.rssKiB)
        guard gatewayDID != nil || gatewayURI != nil else { return result }
        var gatewayEndpoints: [GatewayEndpoint] = []
        for _ in 0..<options.connections {
            if let gateway = try await gatewayEndpoint(group: group) { gatewayEndpoints.append(gateway) }
        }
        let second = await pair(directSide, gatewayEndpoints, name: "gateway")
        for endpoint in gatewayEndpoints { await endpoint.close() }
        let gatewayDirect = Statistics.median(second.direct) ?? 0
        let gatewayMedian = Statistics.median(second.other) ?? 0
        result.gateway = GatewayThroughput(rounds: second.other, median: gatewayMedian,
                                           ratio: gatewayDirect > 0 ? gatewayMedian / gatewayDirect : 0,
                                           failures: second.otherFailures, directRounds: second.direct)
        return result
    }

    /// Rounds of `direct` and `other` taking turns (ABBA), after a warm-up of each.
    private func pair(_ direct: [any BenchEndpoint], _ other: [any BenchEndpoint], name: String) async
        -> (direct: [Double], other: [Double], directFailures: Int, otherFailures: Int, firstError: String?)
    {
        let loop = group.next()
        progress.say("\(prefix)throughput: warming up direct and \(name) (\(format(options.warmupSeconds, 1)) s each)")
        let warmDirect = await ClosedLoopLoad.measure(endpoints: direct, seconds: 0.1, rampSeconds: options.warmupSeconds, loop: loop)
        let warmOther = await ClosedLoopLoad.measure(endpoints: other, seconds: 0.1, rampSeconds: options.warmupSeconds, loop: loop)
        var result = (direct: [Double](), other: [Double](), directFailures: warmDirect.failed, otherFailures: warmOther.failed,
                      firstError: warmDirect.firstError ?? warmOther.firstError)
        for round in 0..<options.rounds {
            for isDirect in round % 2 == 0 ? [true, false] : [false, true] {
                let measured = await ClosedLoopLoad.measure(
                    endpoints: isDirect ? direct : other, seconds: options.roundSeconds, rampSeconds: 0.3, loop: loop)
                if isDirect {
                    result.direct.append(measured.callsPerSecond)
                    result.directFailures += measured.failed
                } else {
                    result.other.append(measured.callsPerSecond)
                    result.otherFailures += measured.failed
                }
                result.firstError = result.firstError ?? measured.firstError
                progress.say("\(prefix)throughput round \(round + 1)/\(options.rounds) \(isDirect ? "direct" : name): "
                    + "\(format(measured.callsPerSecond, 0)) calls/s")
            }
        }
        return result
    }

    func latency(direct unpinned: any DirectBenchEndpoint) async throws -> LatencyResult {
        // Every side on one event loop, so none pays a thread hop another does not.
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
        // One pair at a time, each side against direct blocks of its own: a third path taking
        // turns in the same rotation slowed the JSON-RPC side's figure by 10 to 40 µs.
        let (direct1, daemonSamples, failures1) = try await alternate(direct, daemonEndpoint, loop: loop)
        var result = try Self.latencyResult(direct: direct1, proxied: daemonSamples, failures: failures1,
                                            options: options, target: latencyTarget)
        result.nsid = callName
        progress.say("\(prefix)latency: CPU and context switches over \(options.costCalls) calls per side")
        let directCost = try await CallCost.measure(direct, count: options.costCalls, daemonPID: daemon.pid, loop: loop)
        let daemonCost = try await CallCost.measure(daemonEndpoint, count: options.costCalls, daemonPID: daemon.pid, loop: loop)
        result.cost = CallCosts(direct: directCost, daemon: daemonCost)
        await daemonEndpoint.close()
        let gatewayEndpoint = try await gatewayEndpoint(group: loop)
        if let gatewayEndpoint {
            _ = try await SequentialSampler.sample(gatewayEndpoint, count: warmup, loop: loop)
            result.cost?.gateway = try await CallCost.measure(
                gatewayEndpoint, count: options.costCalls, daemonPID: daemon.pid, loop: loop)
            let (direct2, gatewaySamples, failures2) = try await alternate(direct, gatewayEndpoint, loop: loop)
            if let gatewaySummary = LatencySummary(gatewaySamples), let directSummary = LatencySummary(direct2) {
                result.gateway = gatewaySummary
                result.gatewayDirect = directSummary
                result.gatewayAddedP50 = gatewaySummary.p50 - directSummary.p50
                result.gatewayAddedP99 = gatewaySummary.p99 - directSummary.p99
                result.failures += failures2
            }
        }
        await gatewayEndpoint?.close()
        return result
    }

    /// Sequential calls in blocks, `a` and `b` taking turns (ABBA), until each has
    /// `latencySamples`; their microseconds and the calls that did not answer 200.
    private func alternate(_ a: any BenchEndpoint, _ b: any BenchEndpoint, loop: any EventLoop) async throws
        -> ([Double], [Double], Int)
    {
        var first: [Double] = []
        var second: [Double] = []
        var failures = 0
        var block = 0
        while first.count < options.latencySamples {
            let size = min(options.latencyBlock, options.latencySamples - first.count)
            for isFirst in block % 2 == 0 ? [true, false] : [false, true] {
                let taken = try await SequentialSampler.sample(isFirst ? a : b, count: size, loop: loop)
                failures += taken.failures
                if isFirst { first += taken.microseconds } else { second += taken.microseconds }
            }
            block += 1
        }
        return (first, second, failures)
    }

    private static func latencyResult(direct: [Double], proxied: [Double], failures: Int, options: BenchOptions,
                                      target: Double) throws -> LatencyResult {
        guard let directSummary = LatencySummary(direct), let daemonSummary = LatencySummary(proxied) else {
            throw BenchError.unexpectedReply("no latency samples")
        }
        return LatencyResult(
            nsid: benchNSID, samplesPerSide: direct.count, blockSize: options.latencyBlock,
            direct: directSummary, daemon: daemonSummary,
            addedP50: daemonSummary.p50 - directSummary.p50, addedP99: daemonSummary.p99 - directSummary.p99,
            failures: failures, targetAddedP50: target)
    }
}

/// The `xrpc.call` every daemon-side call sends: `benchNSID` for `did`, about `did`.
enum BenchRequest {
    static func params(did: String) -> JSONValue {
        ["nsid": .string(benchNSID), "account": .string(did), "params": ["actor": .string(did)]]
    }

    /// The request line, newline-terminated.
    static func line(did: String) -> ByteBuffer {
        line(method: "xrpc.call", params: params(did: did))
    }

    static func line(method: String, params: JSONValue) -> ByteBuffer {
        let request: JSONValue = ["jsonrpc": "2.0", "id": 1, "method": .string(method), "params": params]
        var line = ByteBuffer(bytes: request.encoded())
        line.writeInteger(UInt8(ascii: "\n"))
        return line
    }
}
