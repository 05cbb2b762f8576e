import Foundation
import NIOCore

/// What a process has spent so far, as the kernel counts it: CPU time and context switches.
/// Unlike latency these do not move with the host's other load: a call that takes 300 µs of CPU
/// takes it whether the machine is busy or idle (docs/PERFORMANCE.md, "what a call costs").
struct ProcessCounters: Sendable {
    /// `utime` + `stime` (/proc/<pid>/stat), seconds, every thread of the process.
    var cpuSeconds: Double
    /// Times a thread of the process went to sleep waiting for something (a wake-up each).
    var voluntarySwitches: Int
    /// Times the scheduler took the CPU from a thread of the process.
    var involuntarySwitches: Int

    /// `pid` nil reads this process.
    static func read(pid: Int32?) -> ProcessCounters? {
        let directory = pid.map { "/proc/\($0)" } ?? "/proc/self"
        guard let cpu = ProcessCPU.read(path: directory + "/stat"),
              let switches = switches(directory: directory) else { return nil }
        return ProcessCounters(cpuSeconds: cpu.seconds, voluntarySwitches: switches.voluntary,
                               involuntarySwitches: switches.involuntary)
    }

    /// Summed over the process's threads: /proc/<pid>/status counts only its main thread's.
    private static func switches(directory: String) -> (voluntary: Int, involuntary: Int)? {
        guard let threads = try? FileManager.default.contentsOfDirectory(atPath: directory + "/task") else { return nil }
        var total = (voluntary: 0, involuntary: 0)
        for thread in threads {
            // A thread that ended between the listing and the read has no file left: its
            // switches are lost from both readings' sums alike only if it ended before the first.
            guard let status = try? String(contentsOfFile: "\(directory)/task/\(thread)/status", encoding: .utf8) else { continue }
            total.voluntary += Int(MachineInfo.field("voluntary_ctxt_switches", in: status) ?? "") ?? 0
            total.involuntary += Int(MachineInfo.field("nonvoluntary_ctxt_switches", in: status) ?? "") ?? 0
        }
        return total
    }

    static func - (after: ProcessCounters, before: ProcessCounters) -> ProcessCounters {
        ProcessCounters(cpuSeconds: after.cpuSeconds - before.cpuSeconds,
                        voluntarySwitches: after.voluntarySwitches - before.voluntarySwitches,
                        involuntarySwitches: after.involuntarySwitches - before.involuntarySwitches)
    }
}

/// What one side's calls cost per call, over a fixed number of sequential calls on one
/// connection: the daemon's CPU and switches (zero calls' worth for the direct side, which does
/// not go through it) and the calling process's own (the benchmark, which is the direct client).
struct CallCost: Codable, Sendable {
    var calls: Int
    /// Microseconds of daemon CPU per call.
    var daemonCPU: Double
    var daemonVoluntarySwitches: Double
    var daemonInvoluntarySwitches: Double
    /// The benchmark process's own, per call: for the direct side, what a client of its own costs.
    var clientCPU: Double
    var clientVoluntarySwitches: Double
    var clientInvoluntarySwitches: Double
    var failures: Int

    /// `count` sequential calls on `endpoint`, with both processes' counters read around them.
    static func measure(_ endpoint: any BenchEndpoint, count: Int, daemonPID: Int32, loop: any EventLoop) async throws
        -> CallCost
    {
        guard let daemonBefore = ProcessCounters.read(pid: daemonPID), let clientBefore = ProcessCounters.read(pid: nil) else {
            throw BenchError.unexpectedReply("cannot read /proc counters")
        }
        let taken = try await SequentialSampler.sample(endpoint, count: count, loop: loop)
        guard let daemonAfter = ProcessCounters.read(pid: daemonPID), let clientAfter = ProcessCounters.read(pid: nil) else {
            throw BenchError.unexpectedReply("cannot read /proc counters")
        }
        let daemon = daemonAfter - daemonBefore
        let client = clientAfter - clientBefore
        let n = Double(count)
        return CallCost(
            calls: count, daemonCPU: daemon.cpuSeconds * 1e6 / n,
            daemonVoluntarySwitches: Double(daemon.voluntarySwitches) / n,
            daemonInvoluntarySwitches: Double(daemon.involuntarySwitches) / n,
            clientCPU: client.cpuSeconds * 1e6 / n, clientVoluntarySwitches: Double(client.voluntarySwitches) / n,
            clientInvoluntarySwitches: Double(client.involuntarySwitches) / n, failures: taken.failures)
    }
}

/// The cost section of one kind of call: the direct side and each front through blueskyd.
struct CallCosts: Codable, Sendable {
    var direct: CallCost
    var daemon: CallCost
    var gateway: CallCost?
}
