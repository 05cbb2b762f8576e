import ATTestbed
import DaemonHarness
import Foundation

/// One benchmark run: starts the upstream, runs the sections asked for, each on its own so a
/// failure is reported and the next section still runs.
struct BenchRun {
    let options: BenchOptions
    let progress: ProgressLog

    func run() async -> BenchReport {
        // blueskyd must read the key file the store was seeded with, not a systemd credential.
        unsetenv("CREDENTIALS_DIRECTORY")
        var report = BenchReport(
            machine: .current(), upstream: "not started", daemonBinary: Binaries.path("blueskyd"))
        guard FileManager.default.isExecutableFile(atPath: report.daemonBinary) else {
            report.problems.append("no blueskyd executable at \(report.daemonBinary) (set BLUESKYD_BIN_DIR)")
            return report
        }
        let work: TemporaryDirectory
        do {
            work = try TemporaryDirectory("blueskyd-bench")
        } catch {
            report.problems.append("cannot create a working directory: \(describe(error))")
            return report
        }
        defer { work.remove() }
        if ProcessInfo.processInfo.environment["BLUESKYD_HERMETIC"] != "1" {
            report.problems.append("not run under scripts/hermetic-run: the tbN.test names may not resolve (use `make bench`)")
        }

        report.sections = BenchRun.sectionOrder.filter(options.wants)
        // The shared testbed serves every section but the last two (dpop needs none, and
        // refresh-capacity starts its own).
        let needsSharedUpstream = options.sections.contains {
            !["dpop", RefreshCapacityBench.section, ClusterBench.section, RegistryBench.section, FootprintBench.section].contains($0)
        }
        let upstream = needsSharedUpstream ? await startUpstream(directory: work.path + "/testbed", report: &report) : nil
        if !needsSharedUpstream { report.upstream = "none shared (refresh-capacity starts its own testbed)" }
        if options.wants("throughput") || options.wants("latency") || options.wants(GatewayUpload.section)
            || options.wants(OneShotBench.section) {
            if let info = upstream?.info {
                await ProxyBench(options: options, upstream: info, workDirectory: work.path, progress: progress)
                    .run(into: &report)
            } else {
                report.problems.append("throughput and latency: skipped, no upstream PDS")
            }
        }
        if OAuthBench.sections.contains(where: options.wants) {
            if let upstream {
                await OAuthBench(options: options, upstream: upstream, workDirectory: work.path, progress: progress)
                    .run(into: &report)
            } else {
                report.problems.append("oauth: skipped, no upstream PDS")
            }
        }
        if OAuth2Bench.sections.contains(where: options.wants) {
            if let upstream {
                await OAuth2Bench(options: options, upstream: upstream, workDirectory: work.path, progress: progress)
                    .run(into: &report)
            } else {
                report.problems.append("oauth2: skipped, no upstream")
            }
        }
        if options.wants("memory") {
            let memory = MemoryBench(options: options, upstream: upstream?.info, workDirectory: work.path, progress: progress)
            for count in options.accountCounts {
                report.memory.append(await memory.measure(accounts: count))
            }
        }
        if options.wants("dpop") {
            progress.say("dpop: \(DPoPBench.rounds) alternating batches of proofs and raw signatures")
            do {
                report.dpop = try DPoPBench().run()
            } catch {
                report.problems.append("dpop: \(describe(error))")
            }
        }
        if options.wants(EventsBench.section) {
            if let info = upstream?.info {
                progress.say("events: \(EventsBench.subscriberCount) subscribers against none, alternating blocks")
                do {
                    report.events = try await EventsBench(options: options, upstream: info, workDirectory: work.path,
                                                          progress: progress).run()
                } catch {
                    report.problems.append("events: \(describe(error))")
                }
            } else {
                report.problems.append("events: skipped, no upstream PDS")
            }
        }
        await upstream?.stop()
        // Last, on its own testbed: it runs for the length of its window.
        if options.wants(RefreshCapacityBench.section) {
            report.refreshCapacity = await RefreshCapacityBench(options: options, workDirectory: work.path, progress: progress).run()
            if let error = report.refreshCapacity?.error { report.problems.append("refresh-capacity: \(error)") }
        }
        if options.wants(ClusterBench.section) {
            report.cluster = await ClusterBench(options: options, workDirectory: work.path, progress: progress).run()
            if let error = report.cluster?.error { report.problems.append("cluster: \(error)") }
        }
        if options.wants(RegistryBench.section) {
            report.registry = await RegistryBench(options: options, workDirectory: work.path, progress: progress).run()
            if let error = report.registry?.error { report.problems.append("registry: \(error)") }
        }
        if options.wants(FootprintBench.section) {
            do {
                report.footprint = try FootprintBench.measure(directory: work.path)
            } catch {
                report.problems.append("footprint: \(describe(error))")
            }
        }
        return report
    }

    /// Every section, in the order they run.
    static let sectionOrder = ["throughput", "latency", GatewayUpload.section, "oauth-throughput", "oauth-latency", "oauth-nonces",
                               "oauth2-throughput", "oauth2-latency", "memory", "dpop",
                               EventsBench.section, RefreshCapacityBench.section, ClusterBench.section, RegistryBench.section,
                               FootprintBench.section, OneShotBench.section]

    private func startUpstream(directory: String, report: inout BenchReport) async -> StartedUpstream? {
        progress.say("starting the testbed PDS" + (options.inProcessUpstream ? " in this process" : " in a child process"))
        do {
            let upstream = try await StartedUpstream.start(
                directory: directory, settings: UpstreamSettings(nonceRotationSeconds: options.nonceRotationSeconds),
                inProcess: options.inProcessUpstream)
            report.upstream = upstream.description
            return upstream
        } catch {
            report.problems.append("upstream: \(describe(error)); is this running under scripts/hermetic-run?")
            return nil
        }
    }
}
