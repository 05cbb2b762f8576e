import DaemonHarness
import Foundation

/// Section 3: blueskyd's resident memory at rest with many registered accounts.
struct MemoryBench {
    let options: BenchOptions
    let upstream: UpstreamInfo?
    let workDirectory: String
    let progress: ProgressLog

    /// Seeds a fresh state directory with `count` accounts, starts blueskyd on it, lets it
    /// settle and reads its VmRSS.
    func measure(accounts count: Int) async -> MemoryResult {
        var result = MemoryResult(accounts: count)
        let directory = workDirectory + "/memory-\(count)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let pdsURL = upstream?.pdsURL ?? "https://pds.tb1.test"

        progress.say("memory: writing \(count) accounts into a fresh store")
        let seedStart = ContinuousClock.now
        do {
            try await FakeAccounts.seed(stateDirectory: directory + "/state", count: count, pdsURL: pdsURL)
        } catch {
            result.error = describe(error)
            return result
        }
        result.seedSeconds = (ContinuousClock.now - seedStart).inSeconds

        progress.say("memory: starting blueskyd with \(count) accounts")
        let launch = ContinuousClock.now
        let daemon: DaemonProcess
        do {
            daemon = try await DaemonProcess(
                directory: directory, testbed: nil, extraArguments: DaemonArguments.forUpstream(upstream))
        } catch {
            result.error = BenchError.daemonFailed(describe(error)).description
            return result
        }
        result.startSeconds = (ContinuousClock.now - launch).inSeconds
        Watchdog.track(daemon.pid)
        do {
            let status = try await daemon.call("daemon.status")
            result.accountsLoaded = status["accounts"]?.intValue
            try await Task.sleep(for: .seconds(options.settleSeconds))
            if let memory = ProcessMemory.read(pid: daemon.pid) {
                result.rssKiB = memory.rssKiB
                result.peakKiB = memory.peakKiB
            } else {
                result.error = "cannot read /proc/\(daemon.pid)/status"
            }
        } catch {
            result.error = BenchError.daemonFailed("daemon.status: \(describe(error))").description
        }
        _ = await daemon.stop()
        Watchdog.untrack(daemon.pid)
        return result
    }
}

extension Duration {
    var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

/// Seconds since `clock`, which moves on to now: the length of one setup step after another.
func lap(_ clock: inout ContinuousClock.Instant) -> Double {
    let now = ContinuousClock.now
    defer { clock = now }
    return (now - clock).inSeconds
}
