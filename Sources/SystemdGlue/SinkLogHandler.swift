import Logging

/// Where blueskyd's log entries end up: readable lines on stderr, or the journal.
public protocol LogSink: Sendable {
    /// Writes one entry; `metadata` is already merged (handler, provider, event).
    func write(_ event: LogEvent, label: String, metadata: Logger.Metadata)
}

/// The `LogHandler` plumbing blueskyd's handlers share: the daemon-wide level (changed at run
/// time by a reload) unless one logger sets its own, and metadata merged from the logger, its
/// provider and the event before the sink writes the entry.
public struct SinkLogHandler<Sink: LogSink>: LogHandler {
    public let label: String
    public let sink: Sink
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let control: LogLevelControl
    private var ownLevel: Logger.Level?

    public init(label: String, sink: Sink, level: LogLevelControl,
                metadataProvider: Logger.MetadataProvider? = LoggingSystem.metadataProvider) {
        self.label = label
        self.sink = sink
        self.control = level
        self.metadataProvider = metadataProvider
    }

    /// The shared level, unless this one logger was given its own.
    public var logLevel: Logger.Level {
        get { ownLevel ?? control.level }
        set { ownLevel = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        sink.write(event, label: label, metadata: LogFields.merged(metadata, metadataProvider?.get(), event.metadata))
    }
}
