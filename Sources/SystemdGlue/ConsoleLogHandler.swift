import Foundation
import Logging

/// Readable log lines on stderr, for a terminal or a log file:
/// `2026-11-23T14:48:16.123Z info blueskyd: session refreshed account=… did=… outcome=refreshed`.
public typealias ConsoleLogHandler = SinkLogHandler<ConsoleLog>

extension SinkLogHandler where Sink == ConsoleLog {
    public init(label: String, level: LogLevelControl,
                metadataProvider: Logger.MetadataProvider? = LoggingSystem.metadataProvider) {
        self.init(label: label, sink: ConsoleLog(), level: level, metadataProvider: metadataProvider)
    }
}

/// Lines on stderr.
public struct ConsoleLog: LogSink {
    public init() {}

    public func write(_ event: LogEvent, label: String, metadata: Logger.Metadata) {
        let line = Self.format(date: Date(), level: event.level, label: label, message: event.message.description,
                               metadata: metadata)
        FileHandle.standardError.write(Data(line.utf8))
    }

    /// One line, secrets redacted, metadata sorted by key so lines are easy to compare.
    static func format(date: Date, level: Logger.Level, label: String, message: String,
                       metadata: Logger.Metadata) -> String {
        var line = "\(timestamp(date)) \(level) \(label): \(LogRedaction.redact(oneLine(message)))"
        for key in metadata.keys.sorted() {
            line += " \(key)=\(LogRedaction.redact(oneLine(metadata[key]!.description)))"
        }
        return line + "\n"
    }

    /// Newlines become spaces; other control characters (a server's text may carry escape
    /// sequences) and the bidirectional controls (U+202E shows the rest of a line reversed) are
    /// shown as `\u{…}` instead of reaching the terminal.
    private static func oneLine(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { isControl($0.value) }) else { return text }
        var line = ""
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x0A, 0x0D, 0x85: line += " "
            case 0x09: line += "\t"
            case let value where isControl(value): line += "\\u{" + String(value, radix: 16) + "}"
            default: line.unicodeScalars.append(scalar)
            }
        }
        return line
    }

    private static func isControl(_ value: UInt32) -> Bool {
        switch value {
        case 0..<0x20, 0x7F...0x9F, 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    private static func timestamp(_ date: Date) -> String {
        date.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
    }
}

/// Metadata handling shared by both handlers.
enum LogFields {
    /// Handler metadata, then the provider's, then the event's; later ones win.
    static func merged(_ layers: Logger.Metadata?...) -> Logger.Metadata {
        var result: Logger.Metadata = [:]
        for layer in layers {
            guard let layer else { continue }
            result.merge(layer) { _, new in new }
        }
        return result
    }
}
