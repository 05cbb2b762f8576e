import ArgumentParser
import FoundationEssentials
import JSONRPC

/// `bskyctl status`: the daemon's identity and account counts (`daemon.info` + `daemon.status`).
struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show whether blueskyd is running, and how its accounts are doing.",
        discussion: """
            With --json, prints {"info": <daemon.info result>, "status": <daemon.status result>}.
            """)

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func run() throws {
        let client = try connection.connect()
        let info = try client.call("daemon.info")
        let status = try client.call("daemon.status")
        if output.json {
            Console.printLine(JSONValue.object(["info": info, "status": status]).prettyPrinted)
            return
        }
        for line in StatusSummary.lines(info: info, status: status, now: Date()) { Console.printLine(line) }
    }
}

/// The human summary `bskyctl status` prints.
public enum StatusSummary {
    public static func lines(info: JSONValue, status: JSONValue, now: Date) -> [String] {
        func number(_ value: JSONValue?) -> String { value?.intValue.map(String.init) ?? "?" }
        let name = info["name"]?.stringValue ?? "blueskyd"
        let version = info["version"]?.stringValue ?? "?"
        var running = "\(name) \(version) is running (pid \(number(info["pid"])), uid \(number(info["uid"])))"
        if let started = info["startedAt"]?.stringValue.flatMap(Timestamp.parse) {
            running += ", up \(RelativeTime.duration(seconds: now.timeIntervalSince(started)))"
        }
        var lines = [running]
        if let socket = info["socket"]?.stringValue { lines.append("socket:        \(socket)") }
        if let directory = info["stateDirectory"]?.stringValue { lines.append("state:         \(directory)") }
        // After `blueskyd store rekey`, which key this host opens the store with.
        if let key = status["storeKey"]?.stringValue, !key.isEmpty { lines.append("store key:     \(key) (fingerprint)") }
        // During a rekey while a shared store's hosts run: both keys, and where the rows are.
        if let keys = status["storeKeys"], let held = keys["held"]?.arrayValue?.compactMap(\.stringValue),
           let rows = keys["rows"]?.objectValue, held.count > 1 || rows.count > 1 {
            let counts = rows.keys.sorted().map { "\(Console.terminalSafe($0)) \(number(rows[$0]))" }.joined(separator: ", ")
            lines.append("store keys:    \(held.map(Console.terminalSafe).joined(separator: ", ")) held, sealing with "
                         + "\(Console.terminalSafe(keys["writing"]?.stringValue ?? "?")); rows per key: \(counts)")
        }
        if let outage = status["storeUnavailable"], let reason = outage["reason"]?.stringValue {
            var line = "store:         unavailable: \(Console.terminalSafe(reason))"
            if let since = outage["since"]?.stringValue.flatMap(Timestamp.parse) {
                line += " (since \(Timestamp.format(since)); refreshes wait until it can be written)"
            }
            lines.append(line)
        }
        var counts = "\(number(status["active"])) active, \(number(status["needsLogin"])) need login"
        if let retrying = status["retrying"]?.intValue, retrying > 0 { counts += ", \(retrying) retrying" }
        lines.append("accounts:      \(number(status["accounts"])) (\(counts), \(number(status["refreshing"])) refreshing)")
        if let tampered = status["tampered"]?["count"]?.intValue, tampered > 0 {
            let unsealed = status["tampered"]?["unsealed"]?.intValue ?? 0
            lines.append("tampered:      \(tampered) account record\(tampered == 1 ? "" : "s") without a seal that holds "
                         + "(\(unsealed) unsealed): they send no token; 'blueskyd store reseal --dry-run' lists them")
        }
        lines.append("default:       \(status["defaultAccount"]?.stringValue ?? "none")")
        if let next = status["nextRefreshAt"]?.stringValue.flatMap(Timestamp.parse) {
            lines.append("next refresh:  \(RelativeTime.upcoming(next, now: now)) (\(Timestamp.format(next)))")
        }
        return lines
    }
}
