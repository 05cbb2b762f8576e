import DaemonHarness
import Foundation
import NIOCore

/// Section 7: how many `use_dpop_nonce` challenges the PDS sends over a fixed number of proxied
/// OAuth calls, read from the testbed's counter before and after.
///
/// The calls are made as in the throughput section (one socket connection per request in
/// flight, each sending its next request on the reply), but counted, not timed.
struct NonceChallengeBench {
    let options: BenchOptions
    let progress: ProgressLog
    let group: any EventLoopGroup

    /// One proxied call for `did` through `daemon`, checked, and the challenges it met.
    static func oneCall(daemon: DaemonProcess, did: String, counters: any UpstreamControl) async throws -> Int {
        let before = try await counters.oauthCounters(did: did)
        let result = try await daemon.call("xrpc.call", BenchRequest.params(did: did))
        guard result["status"]?.intValue == 200 else {
            throw BenchError.unexpectedReply("an OAuth xrpc.call through blueskyd returned status \(result["status"]?.intValue ?? -1)")
        }
        return try await counters.oauthCounters(did: did).since(before).pdsNonceChallenges
    }

    func run(daemon: DaemonProcess, upstream: UpstreamInfo, counters: any UpstreamControl, setup: String,
             firstCallChallenges: Int?) async throws -> NonceChallengeResult {
        var endpoints: [DaemonEndpoint] = []
        for _ in 0..<options.connections {
            endpoints.append(try await DaemonEndpoint.connect(
                socketPath: daemon.socketPath, requestLine: BenchRequest.line(did: upstream.did), group: group))
        }
        progress.say("oauth-nonces: \(options.nonceCalls) proxied calls, nonces rotating every \(upstream.dpopNonceRotationSeconds) s")
        let before: OAuthCounters
        do {
            before = try await counters.oauthCounters(did: upstream.did)
        } catch {
            for endpoint in endpoints { await endpoint.close() }
            throw error
        }
        let started = Date()
        let measured = await CountedLoad.run(endpoints: endpoints, total: options.nonceCalls, loop: group.next())
        let ended = Date()
        for endpoint in endpoints { await endpoint.close() }
        let during = try await counters.oauthCounters(did: upstream.did).since(before)
        let calls = measured.succeeded + measured.failed
        let period = Double(upstream.dpopNonceRotationSeconds)
        let rotations = Int((ended.timeIntervalSince1970 / period).rounded(.down))
            - Int((started.timeIntervalSince1970 / period).rounded(.down))
        progress.say("oauth-nonces: \(during.pdsNonceChallenges) challenges in \(format(measured.wallSeconds, 1)) s, "
            + "\(rotations) rotations")
        return NonceChallengeResult(
            rotationSeconds: upstream.dpopNonceRotationSeconds, setup: setup, connections: options.connections,
            calls: calls, failed: measured.failed, firstError: measured.firstError, wallSeconds: measured.wallSeconds,
            rotationsDuringRun: rotations, during: during,
            challengesPer10000Calls: calls > 0 ? Double(during.pdsNonceChallenges) * 10_000 / Double(calls) : 0,
            firstCallChallenges: firstCallChallenges)
    }
}
