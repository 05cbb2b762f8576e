import AsyncHTTPClient
import DaemonHarness
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
            let sides = SideBySide(options: options, progress: progress, prefix: "",
                                   daemon: setup.daemon, requestLine: setup.requestLine, group: group,
                                   gatewayDID: upstream.did)
            if options.wants("throughput") {
                do {
                    report.throughput = try await sides.throughput(direct: setup.direct)
                } catch {
                    report.problems.append("throughput: \(describe(error))")
                }
            }
            if options.wants("latency") {
                do {
                    report.latency = try await sides.latency(direct: setup.direct)
                } catch {
                    report.problems.append("latency: \(describe(error))")
                }
            }
            if options.wants(OneShotBench.section) {
                progress.say("oneshot: bskyctl proxy and the Python SDK, \(OneShotBench.runs) starts each")
                do {
                    report.oneShot = try await OneShotBench.measure(daemon: setup.daemon, did: upstream.did)
                } catch {
                    report.problems.append("oneshot: \(describe(error))")
                }
            }
            if options.wants(GatewayUpload.section) {
                progress.say("gateway-upload: 100 MB through the XRPC gateway")
                do {
                    report.gatewayUpload = try await GatewayUpload.measure(
                        socketPath: setup.daemon.gatewaySocketPath, did: upstream.did, bytes: 100_000_000,
                        pid: setup.daemon.pid, group: group)
                } catch {
                    report.problems.append("gateway-upload: \(describe(error))")
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
        let result = try await daemon.call("xrpc.call", BenchRequest.params(did: upstream.did))
        guard result["status"]?.intValue == 200 else {
            throw BenchError.unexpectedReply("xrpc.call through blueskyd returned status \(result["status"]?.intValue ?? -1)")
        }
        return Setup(daemon: daemon, direct: direct, requestLine: BenchRequest.line(did: upstream.did))
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
