import Foundation
import Logging
import Synchronization

/// Where log lines go.
public enum LogTarget: String, Sendable, CaseIterable {
    /// The journal when stderr is connected to it (`JOURNAL_STREAM`), else the console.
    case auto
    /// Structured entries to the journal (sd_journal_sendv).
    case journal
    /// Readable lines on stderr.
    case console
}

/// The log level every handler follows, changeable while running (a reload sets it).
public final class LogLevelControl: Sendable {
    private let raw: Atomic<UInt8>

    public init(_ level: Logger.Level) {
        raw = Atomic(Self.encode(level))
    }

    public var level: Logger.Level {
        get { Self.decode(raw.load(ordering: .relaxed)) }
        set { raw.store(Self.encode(newValue), ordering: .relaxed) }
    }

    private static let levels = Logger.Level.allCases

    private static func encode(_ level: Logger.Level) -> UInt8 {
        UInt8(levels.firstIndex(of: level) ?? 2)
    }

    private static func decode(_ value: UInt8) -> Logger.Level {
        levels[Int(value) < levels.count ? Int(value) : 2]
    }
}

/// Installs blueskyd's log handlers.
public enum LogSetup {
    /// Bootstraps swift-log with the handler for `target`; returns what `auto` resolved to.
    /// Call once, before the first Logger is made.
    @discardableResult
    public static func bootstrap(
        target: LogTarget, level: LogLevelControl, identifier: String,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> LogTarget {
        let resolved = resolve(target, environment: environment)
        LoggingSystem.bootstrap { label in
            switch resolved {
            case .journal: JournalLogHandler(label: label, identifier: identifier, level: level)
            case .auto, .console: ConsoleLogHandler(label: label, level: level)
            }
        }
        return resolved
    }

    /// `auto` becomes `journal` when stderr is the stream systemd connected to the journal.
    public static func resolve(_ target: LogTarget, environment: [String: String]) -> LogTarget {
        guard target == .auto else { return target }
        return stderrIsJournal(environment["JOURNAL_STREAM"]) ? .journal : .console
    }

    /// `JOURNAL_STREAM` is "device:inode" of the journal stream; it may be inherited by a child
    /// whose stderr is something else, so it counts only when it matches fd 2.
    static func stderrIsJournal(_ journalStream: String?) -> Bool {
        guard let parts = journalStream?.split(separator: ":"), parts.count == 2,
              let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var info = stat()
        guard fstat(2, &info) == 0 else { return false }
        return UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }
}
