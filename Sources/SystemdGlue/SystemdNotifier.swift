import CSystemd
import Foundation

/// Tells the service manager how the daemon is doing (`sd_notify(3)`): readiness, a status
/// line, watchdog keep-alives, reloads and the stop.
///
/// Outside systemd (`NOTIFY_SOCKET` unset) every call is a cheap no-op, so the daemon can call
/// it unconditionally.
public struct SystemdNotifier: Sendable {
    /// True when a service manager listens (`NOTIFY_SOCKET` is set).
    public let isEnabled: Bool

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        isEnabled = !(environment["NOTIFY_SOCKET"] ?? "").isEmpty
    }

    /// Start-up is complete; `status` is the first status line.
    public func ready(status: String) {
        send(["READY=1", "STATUS=\(Self.oneLine(status))"])
    }

    /// Replaces the one-line status `systemctl status` shows.
    public func status(_ text: String) {
        send(["STATUS=\(Self.oneLine(text))"])
    }

    /// The daemon is alive; send only after a real liveness check passed.
    public func watchdog() {
        send(["WATCHDOG=1"])
    }

    /// A reload begins; follow it with `ready(status:)` when it is over, whatever its outcome.
    /// MONOTONIC_USEC lets systemd 253+ (Type=notify-reload) match it; 252 ignores it.
    public func reloading() {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let microseconds = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
        send(["RELOADING=1", "MONOTONIC_USEC=\(microseconds)"])
    }

    /// A graceful stop begins.
    public func stopping(status: String) {
        send(["STOPPING=1", "STATUS=\(Self.oneLine(status))"])
    }

    private func send(_ assignments: [String]) {
        guard isEnabled else { return }
        // One datagram, so READY and its STATUS arrive together; failures are not ours to fix.
        _ = sd_notify(0, assignments.joined(separator: "\n"))
    }

    /// The protocol is line-based: a newline in a status would start a bogus assignment.
    static func oneLine(_ text: String) -> String {
        String(text.map { $0.isNewline ? " " : $0 })
    }
}

/// The watchdog systemd expects (`WatchdogSec=`), from `WATCHDOG_USEC`/`WATCHDOG_PID`.
public enum SystemdWatchdog {
    /// How long systemd waits for a keep-alive before it kills the service, or nil when no
    /// watchdog applies to this process. Ping at half of it, as sd_watchdog_enabled(3) advises.
    public static func timeout() -> Duration? {
        var microseconds: UInt64 = 0
        guard sd_watchdog_enabled(0, &microseconds) > 0, microseconds > 0 else { return nil }
        return .microseconds(Int64(clamping: microseconds))
    }
}
