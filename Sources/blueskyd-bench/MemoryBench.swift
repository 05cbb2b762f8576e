import DaemonHarness
import Foundation

/// Section 3: blueskyd's resident memory at rest with many registered accounts.
struct MemoryBench {
    let options: BenchOptions
    let upstream: UpstreamInfo?
    let workDirectory: String
    let progress: ProgressLog

    /// Seeds a fresh state directory with `count` accounts, then starts blueskyd on it
    /// `memoryStarts` times; each start settles and has its VmRSS read. The medians are reported:
    /// from one start to the next RSS varies by a few MiB (where the allocator's arenas leave the
    /// pages that loading freed).
    /// Seconds the starts after the first may take: at 100,000 accounts a start and stop take
    /// about 3 s, plus the settle.
    static func timeBudget(_ options: BenchOptions) -> Double {
        let perStart = options.accountCounts.reduce(0.0) { $0 + 5 + options.settleSeconds + Double($1) / 100_000 * 3 }
        return perStart * Double(options.memoryStarts * (options.baselineBinDir == nil ? 1 : 2) - 1)
    }

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

        // With a baseline, the two builds take turns on the same store (ABBA), so that what the
        // host does meanwhile weighs on both.
        let baseline = options.baselineBinDir.map { $0 + "/blueskyd" }
        var starts: [MemoryStart] = [], baselineStarts: [MemoryStart] = []
        runs: for run in 1...options.memoryStarts {
            let order: [String?] = baseline.map { run % 2 == 1 ? [$0, nil] : [nil, $0] } ?? [nil]
            for executable in order {
                let which = executable == nil ? "" : " (baseline)"
                progress.say("memory: starting blueskyd\(which) with \(count) accounts (\(run) of \(options.memoryStarts))")
                var start = await startOnce(directory: directory, executable: executable)
                if executable != nil, let loaded = start.accountsLoaded, loaded != count, start.error == nil {
                    start.error = "daemon.status reports \(loaded) accounts"
                }
                if let error = start.error { result.error = (executable == nil ? "" : "baseline: ") + error }
                if let loaded = start.accountsLoaded, executable == nil { result.accountsLoaded = loaded }
                guard start.error == nil else { break runs }
                if executable == nil { starts.append(start) } else { baselineStarts.append(start) }
            }
        }
        result.take(MemorySide(starts))
        if baseline != nil { result.baseline = MemorySide(baselineStarts) }
        return result
    }
}

extension MemorySide {
    /// The medians of `starts`.
    fileprivate init(_ starts: [MemoryStart]) {
        rssSamplesKiB = starts.compactMap(\.rssKiB)
        rssKiB = Statistics.median(rssSamplesKiB.map(Double.init)).map { Int($0) }
        peakKiB = Statistics.median(starts.compactMap(\.peakKiB).map(Double.init)).map { Int($0) }
        startSeconds = Statistics.median(starts.compactMap(\.seconds))
        startCPUSeconds = Statistics.median(starts.compactMap(\.cpuSeconds))
    }
}

extension MemoryResult {
    /// This build's medians (the report keeps them at the top level, as before the baseline).
    fileprivate mutating func take(_ side: MemorySide) {
        (rssKiB, rssSamplesKiB, peakKiB, startSeconds, startCPUSeconds) =
            (side.rssKiB, side.rssSamplesKiB, side.peakKiB, side.startSeconds, side.startCPUSeconds)
    }

    /// This build's medians, as the baseline's are kept.
    var side: MemorySide {
        MemorySide(rssKiB: rssKiB, rssSamplesKiB: rssSamplesKiB, peakKiB: peakKiB, startSeconds: startSeconds,
                   startCPUSeconds: startCPUSeconds)
    }
}

/// One start of blueskyd on a seeded store.
private struct MemoryStart {
    var seconds: Double?
    var accountsLoaded: Int?
    var rssKiB: Int?
    var peakKiB: Int?
    var cpuSeconds: Double?
    var error: String?
}

extension MemoryBench {
    private func startOnce(directory: String, executable: String?) async -> MemoryStart {
        var start = MemoryStart()
        let launch = ContinuousClock.now
        let daemon: DaemonProcess
        do {
            daemon = try await DaemonProcess(
                directory: directory, testbed: nil, extraArguments: DaemonArguments.forUpstream(upstream),
                executable: executable)
        } catch {
            start.error = BenchError.daemonFailed(describe(error)).description
            return start
        }
        start.seconds = (ContinuousClock.now - launch).inSeconds
        // What the start cost in CPU (every thread, user and system): the host's load moves the
        // wall time, not this.
        start.cpuSeconds = ProcessCPU.read(pid: daemon.pid)?.seconds
        Watchdog.track(daemon.pid)
        do {
            let status = try await daemon.call("daemon.status")
            start.accountsLoaded = status["accounts"]?.intValue
            try await Task.sleep(for: .seconds(options.settleSeconds))
            if let memory = ProcessMemory.read(pid: daemon.pid) {
                start.rssKiB = memory.rssKiB
                start.peakKiB = memory.peakKiB
            } else {
                start.error = "cannot read /proc/\(daemon.pid)/status"
            }
        } catch {
            start.error = BenchError.daemonFailed("daemon.status: \(describe(error))").description
        }
        _ = await daemon.stop()
        Watchdog.untrack(daemon.pid)
        return start
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
