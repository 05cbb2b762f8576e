import CSystemd
import Foundation
import Logging

/// Structured entries in the systemd journal (`sd_journal_sendv(3)`).
///
/// Each entry has MESSAGE, PRIORITY (from the log level), SYSLOG_IDENTIFIER, the code location,
/// and every metadata key as an upper-case field, so `journalctl --user -u blueskyd
/// DID=did:plc:…` or `OUTCOME=needs-login` finds the lines about one account or outcome.
public typealias JournalLogHandler = SinkLogHandler<JournalLog>

extension SinkLogHandler where Sink == JournalLog {
    public init(label: String, identifier: String, level: LogLevelControl,
                metadataProvider: Logger.MetadataProvider? = LoggingSystem.metadataProvider) {
        self.init(label: label, sink: JournalLog(identifier: identifier), level: level, metadataProvider: metadataProvider)
    }
}

/// Entries sent to the journal, tagged with `identifier`.
public struct JournalLog: LogSink {
    public let identifier: String

    public init(identifier: String) {
        self.identifier = identifier
    }

    public func write(_ event: LogEvent, label: String, metadata: Logger.Metadata) {
        let fields = Self.fields(
            level: event.level, message: event.message.description, identifier: identifier, label: label,
            metadata: metadata, file: event.file, function: event.function, line: event.line)
        guard Self.send(fields) else {
            // No journal to take it (log_target = journal outside systemd, journald restarting):
            // a line on stderr beats a lost entry.
            ConsoleLog().write(event, label: label, metadata: metadata)
            return
        }
    }

    /// The entry's fields as `NAME=value` strings, secrets redacted.
    static func fields(level: Logger.Level, message: String, identifier: String, label: String,
                       metadata: Logger.Metadata, file: String, function: String, line: UInt) -> [String] {
        var fields = [
            "MESSAGE=\(LogRedaction.redact(message))",
            "PRIORITY=\(priority(level))",
            "SYSLOG_IDENTIFIER=\(identifier)",
            "LOGGER=\(label)",
            "CODE_FILE=\(file)",
            "CODE_LINE=\(line)",
            "CODE_FUNC=\(function)",
        ]
        let reserved: Set<String> = ["MESSAGE", "PRIORITY", "SYSLOG_IDENTIFIER", "LOGGER", "CODE_FILE",
                                     "CODE_LINE", "CODE_FUNC", "MESSAGE_ID", "ERRNO"]
        for key in metadata.keys.sorted() {
            var name = fieldName(key)
            if reserved.contains(name) { name = "META_" + name }
            fields.append("\(name)=\(LogRedaction.redact(metadata[key]!.description))")
        }
        return fields
    }

    /// syslog priorities: debug 7, info 6, notice 5, warning 4, err 3, crit 2.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    /// A journal field name: A-Z, 0-9 and "_", not starting with "_" or a digit (the journal
    /// reserves leading underscores for trusted fields), at most 64 characters.
    static func fieldName(_ key: String) -> String {
        var name = String(key.uppercased().map { c -> Character in
            (c.isASCII && (c.isLetter || c.isNumber)) ? c : "_"
        })
        while name.first == "_" { name.removeFirst() }
        if name.isEmpty || name.first!.isNumber { name = "F_" + name }
        return String(name.prefix(64))
    }

    /// True when the journal took the entry.
    private static func send(_ fields: [String]) -> Bool {
        let buffers = fields.map { field -> UnsafeMutableRawBufferPointer in
            let bytes = Array(field.utf8)
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 1)
            buffer.copyBytes(from: bytes)
            return UnsafeMutableRawBufferPointer(rebasing: buffer[0..<bytes.count])
        }
        defer { buffers.forEach { $0.deallocate() } }
        let vectors = buffers.map { iovec(iov_base: $0.baseAddress, iov_len: $0.count) }
        return vectors.withUnsafeBufferPointer { sd_journal_sendv($0.baseAddress, Int32($0.count)) >= 0 }
    }
}
