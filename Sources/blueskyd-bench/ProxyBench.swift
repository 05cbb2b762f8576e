import AsyncHTTPClient
import BlueskyTesting
import Foundation
import JSONRPC
import NIOCore
import NIOPosix

/// Sections 1 and 2: the same XRPC call straight to the PDS and through blueskyd.
struct ProxyBench {
    let options: BenchOptions
    let upstream: UpstreamInfo
    let workDirectory: String
    let progress: ProgressLog

    func run(into report: inout BenchReport) async {
        // Shutting the group down at the end also closes every socket connection to the daemon.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
        let client: HTTPClient
        do {
            client = try DirectClient.make(caFile: upstream.caFile, connections: options.connections, group: group)
        } catch {
            report.problems.append("throughput and latency: cannot set up the HTTPS client: \(describe(error))")
            try? await group.shutdownGracefully()
            return
        }
        var daemon: DaemonProcess?
        do {
            let setup = try await prepare(client: client, group: group)
            daemon = setup.daemon
            if options.wants("throughput") {
                do {
                    report.throughput = try await throughput(setup, group: group)
                } catch {
                    report.problems.append("throughput: \(describe(error))")
                }
            }
            if options.wants("latency") {
                do {
                    report.latency = try await latency(setup, group: group)
                } catch {
                    report.problems.append("latency: \(describe(error))")
                }
            }
        } catch {
            report.problems.append("throughput and latency: \(describe(error))")
        }
        if let daemon {
            _ = await daemon.stop()
            Watchdog.untrack(daemon.pid)
        }
        try? await client.shutdown()
        try? await group.shutdownGracefully()
    }

    /// The pieces both sections use.
    struct Setup {
        let daemon: DaemonProcess
        let direct: DirectEndpoint
        let requestLine: ByteBuffer
    }

    /// Logs in directly, starts blueskyd with the same account, and checks one call each way.
    private func prepare(client: HTTPClient, group: any EventLoopGroup) async throws -> Setup {
        progress.say("logging in directly at \(upstream.pdsURL)")
        let token = try await DirectClient.createSession(client: client, upstream: upstream)
        let direct = DirectEndpoint(
            client: client, request: try DirectClient.profileRequest(upstream: upstream, accessToken: token))
        guard try await direct.callOnce().get() else {
            throw BenchError.unexpectedReply("the direct \(benchNSID) call did not return status 200")
        }

        progress.say("starting blueskyd (\(Binaries.path("blueskyd")))")
        let daemon: DaemonProcess
        do {
            try FileManager.default.createDirectory(atPath: workDirectory + "/proxy", withIntermediateDirectories: true)
            daemon = try await DaemonProcess(
                directory: workDirectory + "/proxy", testbed: nil,
                extraArguments: DaemonArguments.forUpstream(upstream))
        } catch {
            throw BenchError.daemonFailed(describe(error))
        }
        Watchdog.track(daemon.pid)
        do {
            try await daemon.call("accounts.add", ["identifier": .string(upstream.did), "password": .string(upstream.appPassword)])
        } catch {
            throw BenchError.daemonFailed("accounts.add: \(describe(error))")
        }
        let params: JSONValue = ["nsid": .string(benchNSID), "account": .string(upstream.did),
                                 "params": ["actor": .string(upstream.did)]]
        let result = try await daemon.call("xrpc.call", params)
        guard result["status"]?.intValue == 200 else {
            throw BenchError.unexpectedReply("xrpc.call through blueskyd returned status \(result["status"]?.intValue ?? -1)")
        }
        let request: JSONValue = ["jsonrpc": "2.0", "id": 1, "method": "xrpc.call", "params": params]
        var line = ByteBuffer(bytes: request.encoded())
        line.writeInteger(UInt8(ascii: "\n"))
        return Setup(daemon: daemon, direct: direct, requestLine: line)
    }

    private func throughput(_ setup: Setup, group: any EventLoopGroup) async throws -> ThroughputResult {
        var daemonEndpoints: [DaemonEndpoint] = []
        for _ in 0..<options.connections {
            daemonEndpoints.append(try await DaemonEndpoint.connect(
                socketPath: setup.daemon.socketPath, requestLine: setup.requestLine, group: group))
        }
        let direct: [any BenchEndpoint] = Array(repeating: setup.direct, count: options.connections)
        let daemon: [any BenchEndpoint] = daemonEndpoints
        let loop = group.next()

        progress.say("throughput: warming up both sides (\(format(options.warmupSeconds, 1)) s each)")
        let warmDirect = await ClosedLoopLoad.measure(endpoints: direct, seconds: 0.1, rampSeconds: options.warmupSeconds, loop: loop)
        let warmDaemon = await ClosedLoopLoad.measure(endpoints: daemon, seconds: 0.1, rampSeconds: options.warmupSeconds, loop: loop)
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
                    endpoints: isDirect ? direct : daemon, seconds: options.roundSeconds, rampSeconds: 0.3, loop: loop)
                if isDirect {
                    directRounds.append(measured.callsPerSecond)
                    directFailures += measured.failed
                } else {
                    daemonRounds.append(measured.callsPerSecond)
                    daemonFailures += measured.failed
                }
                firstError = firstError ?? measured.firstError
                progress.say("throughput round \(round + 1)/\(options.rounds) \(isDirect ? "direct" : "daemon"): "
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
            daemonRSSAfterLoadKiB: ProcessMemory.read(pid: setup.daemon.pid)?.rssKiB)
        for endpoint in daemonEndpoints { await endpoint.close() }
        return result
    }

    private func latency(_ setup: Setup, group: any EventLoopGroup) async throws -> LatencyResult {
        // Both sides on one event loop, so neither pays a thread hop the other does not.
        let loop = group.next()
        var direct = setup.direct
        direct.preference = .delegateAndChannel(on: loop)
        let daemon = try await DaemonEndpoint.connect(
            socketPath: setup.daemon.socketPath, requestLine: setup.requestLine, group: loop)

        progress.say("latency: \(options.latencySamples) sequential calls per side")
        let warmup = min(200, options.latencySamples)
        _ = try await SequentialSampler.sample(direct, count: warmup, loop: loop)
        _ = try await SequentialSampler.sample(daemon, count: warmup, loop: loop)
        var directSamples: [Double] = []
        var daemonSamples: [Double] = []
        var failures = 0
        var block = 0
        while directSamples.count < options.latencySamples {
            let size = min(options.latencyBlock, options.latencySamples - directSamples.count)
            let order = block % 2 == 0 ? [true, false] : [false, true]
            for isDirect in order {
                let endpoint: any BenchEndpoint = isDirect ? direct : daemon
                let samples = try await SequentialSampler.sample(endpoint, count: size, loop: loop)
                failures += samples.failures
                if isDirect { directSamples += samples.microseconds } else { daemonSamples += samples.microseconds }
            }
            block += 1
        }
        await daemon.close()
        guard let directSummary = LatencySummary(directSamples), let daemonSummary = LatencySummary(daemonSamples) else {
            throw BenchError.unexpectedReply("no latency samples")
        }
        return LatencyResult(
            nsid: benchNSID, samplesPerSide: directSamples.count, blockSize: options.latencyBlock,
            direct: directSummary, daemon: daemonSummary,
            addedP50: daemonSummary.p50 - directSummary.p50, addedP99: daemonSummary.p99 - directSummary.p99,
            failures: failures)
    }
}

/// The command-line arguments blueskyd gets in every section.
enum DaemonArguments {
    /// Trust the testbed CA and resolve DIDs at its PLC; log at the default level, as deployed.
    static func forUpstream(_ upstream: UpstreamInfo?) -> [String] {
        var arguments = ["--log-level", "info"]
        if let upstream { arguments += ["--ca-file", upstream.caFile, "--plc-url", upstream.plcURL] }
        return arguments
    }
}
