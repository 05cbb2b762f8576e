import Foundation

/// CPU time a process has used so far, from /proc/<pid>/stat.
struct ProcessCPU: Codable, Sendable {
    /// `utime` + `stime`, in seconds.
    var seconds: Double
    /// `cutime` + `cstime`: the children it has waited for, in seconds.
    var childrenSeconds: Double = 0

    static func read(pid: Int32) -> ProcessCPU? {
        read(path: "/proc/\(pid)/stat")
    }

    static func read(path: String) -> ProcessCPU? {
        guard let stat = try? String(contentsOfFile: path, encoding: .utf8),
              let commandEnd = stat.lastIndex(of: ")") else { return nil }
        // After the command name (which may hold spaces, hence the last ")"): state is field 3,
        // utime and stime are fields 14 and 15 of the whole line.
        let fields = stat[stat.index(after: commandEnd)...].split(separator: " ")
        guard fields.count > 14, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        let children = (Double(fields[13]) ?? 0) + (Double(fields[14]) ?? 0)
        return ProcessCPU(seconds: (user + system) / Double(clockTicksPerSecond),
                          childrenSeconds: children / Double(clockTicksPerSecond))
    }

    /// The parent's pid (field 4 of /proc/<pid>/stat).
    static func parent(of pid: Int32) -> Int32? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let commandEnd = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: commandEnd)...].split(separator: " ")
        return fields.count > 1 ? Int32(fields[1]) : nil
    }

    private static let clockTicksPerSecond = max(1, sysconf(Int32(_SC_CLK_TCK)))
}

/// A process watched over a long run: its CPU time and resident memory, sampled.
struct ProcessSample: Codable, Sendable {
    /// Seconds since the watch began.
    var at: Double
    var cpuSeconds: Double?
    var rssKiB: Int?
}

/// Samples one process now and then, for a section that runs for minutes.
final class ProcessWatch: @unchecked Sendable {
    let pid: Int32
    private let start = ContinuousClock.now
    private let lock = NSLock()
    private var recorded: [ProcessSample] = []

    init(pid: Int32) {
        self.pid = pid
    }

    /// Reads the process's CPU time and RSS now, keeps and returns the sample.
    @discardableResult
    func sample() -> ProcessSample {
        let sample = ProcessSample(at: (ContinuousClock.now - start).inSeconds,
                                   cpuSeconds: ProcessCPU.read(pid: pid)?.seconds,
                                   rssKiB: ProcessMemory.read(pid: pid)?.rssKiB)
        lock.withLock { recorded.append(sample) }
        return sample
    }

    var samples: [ProcessSample] { lock.withLock { recorded } }
}
