import Foundation

/// The machine a run happened on, for the report.
struct MachineInfo: Codable, Sendable {
    var date: String
    var processors: Int
    var cpuModel: String
    var memoryTotal: String
    var kernel: String

    static func current() -> MachineInfo {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let meminfo = (try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8)) ?? ""
        let kernel = (try? String(contentsOfFile: "/proc/sys/kernel/osrelease", encoding: .utf8)) ?? "unknown"
        let formatter = ISO8601DateFormatter()
        return MachineInfo(
            date: formatter.string(from: Date()),
            processors: ProcessInfo.processInfo.activeProcessorCount,
            cpuModel: field("model name", in: cpuinfo) ?? "unknown",
            memoryTotal: field("MemTotal", in: meminfo) ?? "unknown",
            kernel: kernel.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// The value of the first `name: value` line of a /proc file.
    static func field(_ name: String, in text: String) -> String? {
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == name {
                return parts[1].trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }
}

/// Memory figures of a process from /proc/<pid>/status, in KiB.
struct ProcessMemory: Codable, Sendable {
    /// Resident set size now (`VmRSS`).
    var rssKiB: Int
    /// Peak resident set size (`VmHWM`).
    var peakKiB: Int?

    static func read(pid: Int32) -> ProcessMemory? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let rss = kibibytes(MachineInfo.field("VmRSS", in: status))
        else { return nil }
        return ProcessMemory(rssKiB: rss, peakKiB: kibibytes(MachineInfo.field("VmHWM", in: status)))
    }

    private static func kibibytes(_ value: String?) -> Int? {
        value.flatMap { Int($0.split(separator: " ").first ?? "") }
    }
}
