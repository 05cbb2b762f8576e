import AsyncHTTPClient
import BlueskyHTTP
import DaemonHarness
import Foundation
import NIOCore
import NIOPosix

/// Sections 5 to 7, for an OAuth account: blueskyd logged in to the benchmark account with
/// OAuth (DPoP-bound tokens), measured as sections 1 and 2 against a direct client with its
/// own OAuth session, then the PDS's nonce challenges over a fixed number of proxied calls.
struct OAuthBench {
    static let sections = ["oauth-throughput", "oauth-latency", "oauth-nonces"]

    let options: BenchOptions
    let upstream: StartedUpstream
    let workDirectory: String
    let progress: ProgressLog

    func run(into report: inout BenchReport) async {
        // Shutting the group down at the end also closes every socket connection to the daemon.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
        let client: HTTPClient
        // For the logins only (the authorization server, the redirects): ATOAuth's client.
        let loginHTTP: OutboundHTTP
        do {
            client = try DirectClient.make(caFile: upstream.info.caFile, connections: options.connections, group: group)
            loginHTTP = try OutboundHTTP(.init(extraCAFile: upstream.info.caFile))
        } catch {
            report.problems.append("oauth: cannot set up the HTTPS clients: \(describe(error))")
            try? await group.shutdownGracefully()
            return
        }
        var daemon: DaemonProcess?
        do {
            let setup = try await prepare(client: client, loginHTTP: loginHTTP)
            daemon = setup.daemon
            let sides = SideBySide(options: options, progress: progress, prefix: "oauth-", daemon: setup.daemon,
                                   requestLine: BenchRequest.line(did: upstream.info.did), group: group,
                                   latencyTarget: LatencyResult.oauthTarget, gatewayDID: upstream.info.did)
            if options.wants("oauth-throughput"), let direct = setup.direct {
                do {
                    report.oauthThroughput = try await sides.throughput(direct: direct)
                } catch {
                    report.problems.append("oauth-throughput: \(describe(error))")
                }
            }
            if options.wants("oauth-latency"), let direct = setup.direct {
                do {
                    report.oauthLatency = try await sides.latency(direct: direct)
                } catch {
                    report.problems.append("oauth-latency: \(describe(error))")
                }
            }
            if options.wants("oauth-nonces") {
                do {
                    report.nonceChallenges.append(try await NonceChallengeBench(options: options, progress: progress, group: group)
                        .run(daemon: setup.daemon, upstream: upstream.info, counters: upstream.control,
                             setup: "the benchmark's testbed, " + (setup.direct == nil
                                 ? "the OAuth daemon" : "the OAuth daemon of the sections above, after them"),
                             firstCallChallenges: setup.firstCallChallenges))
                } catch {
                    report.problems.append("oauth-nonces: \(describe(error))")
                }
            }
        } catch {
            report.problems.append("oauth: \(describe(error))")
        }
        if let daemon { await stop(daemon) }
        if options.wants("oauth-nonces"), options.shortNonceRotationSeconds > 0 {
            do {
                report.nonceChallenges.append(try await shortRotationRun(group: group))
            } catch {
                report.problems.append("oauth-nonces (\(options.shortNonceRotationSeconds) s rotation): \(describe(error))")
            }
        }
        try? await loginHTTP.shutdown()
        try? await client.shutdown()
        try? await group.shutdownGracefully()
    }

    /// What the sections share.
    struct Setup {
        let daemon: DaemonProcess
        /// nil when only the nonce section runs (it needs no direct side).
        let direct: DPoPDirectEndpoint?
        let firstCallChallenges: Int
    }

    /// Starts blueskyd, logs it in with OAuth and checks one proxied call; logs in directly
    /// too and checks one direct call, when a side-by-side section runs.
    private func prepare(client: HTTPClient, loginHTTP: OutboundHTTP) async throws -> Setup {
        let info = upstream.info
        let (daemon, firstCallChallenges) = try await startLoggedInDaemon(
            upstream: upstream, directory: workDirectory + "/oauth", loginHTTP: loginHTTP)
        do {
            guard options.wants("oauth-throughput") || options.wants("oauth-latency") else {
                return Setup(daemon: daemon, direct: nil, firstCallChallenges: firstCallChallenges)
            }
            progress.say("oauth: logging in directly with OAuth at \(info.pdsURL)")
            let session = try await DirectOAuthSession.login(upstream: info, http: loginHTTP)
            guard session.did == info.did else { throw BenchError.oauthLoginFailed("the direct session is for another DID") }
            let direct = try DPoPDirectEndpoint(client: client, session: session, upstream: info)
            guard try await direct.callOnce().get() else {
                throw BenchError.unexpectedReply("the direct DPoP-bound \(benchNSID) call did not return status 200")
            }
            return Setup(daemon: daemon, direct: direct, firstCallChallenges: firstCallChallenges)
        } catch {
            await stop(daemon)
            throw error
        }
    }

    /// blueskyd on a fresh state directory, its OAuth login to the benchmark account done, and
    /// its first proxied call made; returns the challenges that call met.
    private func startLoggedInDaemon(upstream: StartedUpstream, directory: String, loginHTTP: OutboundHTTP)
        async throws -> (DaemonProcess, Int)
    {
        progress.say("oauth: starting blueskyd and logging it in with OAuth (testbed \(upstream.info.pdsURL))")
        let daemon: DaemonProcess
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            daemon = try await DaemonProcess(
                directory: directory, testbed: nil, extraArguments: DaemonArguments.forUpstream(upstream.info))
        } catch {
            throw BenchError.daemonFailed(describe(error))
        }
        Watchdog.track(daemon.pid)
        do {
            try await DaemonOAuthLogin.login(daemon: daemon, did: upstream.info.did, http: loginHTTP)
            let challenges = try await NonceChallengeBench.oneCall(
                daemon: daemon, did: upstream.info.did, counters: upstream.control)
            return (daemon, challenges)
        } catch {
            await stop(daemon)
            throw error
        }
    }

    /// Section 7 again against a second testbed whose nonces rotate every few seconds, so
    /// that rotations happen during the calls: its own upstream and daemon, stopped after.
    private func shortRotationRun(group: any EventLoopGroup) async throws -> NonceChallengeResult {
        let period = options.shortNonceRotationSeconds
        progress.say("oauth-nonces: starting a second testbed, nonces rotating every \(period) s")
        let shortUpstream = try await StartedUpstream.start(
            directory: workDirectory + "/testbed-nonces", settings: UpstreamSettings(nonceRotationSeconds: period),
            inProcess: options.inProcessUpstream)
        do {
            // This testbed has its own CA.
            let loginHTTP = try OutboundHTTP(.init(extraCAFile: shortUpstream.info.caFile))
            let daemon: DaemonProcess
            let firstCallChallenges: Int
            do {
                (daemon, firstCallChallenges) = try await startLoggedInDaemon(
                    upstream: shortUpstream, directory: workDirectory + "/oauth-nonces", loginHTTP: loginHTTP)
            } catch {
                try? await loginHTTP.shutdown()
                throw error
            }
            try? await loginHTTP.shutdown()
            do {
                var result = try await NonceChallengeBench(options: options, progress: progress, group: group)
                    .run(daemon: daemon, upstream: shortUpstream.info, counters: shortUpstream.control,
                         setup: "a second testbed (\(shortUpstream.info.pdsURL)) and a fresh daemon",
                         firstCallChallenges: firstCallChallenges)
                // What a sparse caller meets: its nonce outlived. Previous, current and next are
                // accepted, so the last response's nonce lasts one to two periods.
                let idle = Double(2 * period) + 0.5
                progress.say("oauth-nonces: idle for \(format(idle, 1)) s, then one call")
                try await Task.sleep(for: .seconds(idle))
                result.idleSeconds = idle
                result.afterIdleChallenges = try await NonceChallengeBench.oneCall(
                    daemon: daemon, did: shortUpstream.info.did, counters: shortUpstream.control)
                await stop(daemon)
                await shortUpstream.stop()
                return result
            } catch {
                await stop(daemon)
                throw error
            }
        } catch {
            await shortUpstream.stop()
            throw error
        }
    }

    private func stop(_ daemon: DaemonProcess) async {
        _ = await daemon.stop()
        Watchdog.untrack(daemon.pid)
    }
}
